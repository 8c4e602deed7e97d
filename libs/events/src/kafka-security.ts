import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ConnectionOptions } from 'node:tls';
import type { SASLOptions } from 'kafkajs';

/** How a service authenticates to Kafka: the KAFKA_TLS* and KAFKA_SASL_* variables (libs/config kafkaVars). */
export interface KafkaSecurityConfig {
  tls?: boolean | undefined;
  tlsCaFile?: string | undefined;
  /** Client certificate and its key (PEM) for brokers that require one (mTLS; Strimzi's user.crt/user.key). */
  tlsCertFile?: string | undefined;
  tlsKeyFile?: string | undefined;
  saslMechanism?: 'plain' | 'scram-sha-256' | 'scram-sha-512' | 'oauthbearer' | undefined;
  saslUsername?: string | undefined;
  saslPassword?: string | undefined;
  oauthBearerTokenFile?: string | undefined;
}

export interface KafkaClientSecurity {
  ssl?: boolean | ConnectionOptions;
  sasl?: SASLOptions;
}

/**
 * kafkajs's `ssl` and `sasl` from the configuration. Refuses (at start-up, naming the variables)
 * combinations that would silently connect without what the operator asked for.
 */
export function kafkaClientSecurity(config: KafkaSecurityConfig): KafkaClientSecurity {
  const out: KafkaClientSecurity = {};
  for (const [name, value] of [
    ['KAFKA_TLS_CA_FILE', config.tlsCaFile],
    ['KAFKA_TLS_CERT_FILE', config.tlsCertFile],
    ['KAFKA_TLS_KEY_FILE', config.tlsKeyFile],
  ] as const)
    if (value && !config.tls)
      throw new Error(`${name} is set but KAFKA_TLS is not true; set KAFKA_TLS=true to connect with TLS`);
  if (!config.tlsCertFile !== !config.tlsKeyFile)
    throw new Error(
      'KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together: the client certificate and its private key (PEM)',
    );
  if (config.tls) {
    const ssl: ConnectionOptions = {};
    if (config.tlsCaFile) ssl.ca = [pemFile('KAFKA_TLS_CA_FILE', config.tlsCaFile, 'the CA certificate')];
    if (config.tlsCertFile && config.tlsKeyFile) {
      ssl.cert = pemFile('KAFKA_TLS_CERT_FILE', config.tlsCertFile, 'the client certificate');
      ssl.key = pemFile('KAFKA_TLS_KEY_FILE', config.tlsKeyFile, "the client certificate's key");
    }
    out.ssl = Object.keys(ssl).length ? ssl : true;
  }
  const mechanism = config.saslMechanism;
  if (!mechanism) {
    if (config.saslUsername || config.saslPassword || config.oauthBearerTokenFile) {
      throw new Error(
        'KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD or KAFKA_SASL_OAUTHBEARER_TOKEN_FILE is set without KAFKA_SASL_MECHANISM; set the mechanism (plain, scram-sha-256, scram-sha-512, oauthbearer)',
      );
    }
    return out;
  }
  if (mechanism === 'oauthbearer') {
    const file = config.oauthBearerTokenFile;
    if (!file)
      throw new Error(
        'KAFKA_SASL_MECHANISM=oauthbearer needs KAFKA_SASL_OAUTHBEARER_TOKEN_FILE (a file holding the current access token)',
      );
    // Read at every (re)authentication, so a token refreshed on disk is picked up without a restart.
    out.sasl = { mechanism, oauthBearerProvider: async () => ({ value: (await readFile(file, 'utf8')).trim() }) };
    return out;
  }
  if (!config.saslUsername || !config.saslPassword) {
    throw new Error(`KAFKA_SASL_MECHANISM=${mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD`);
  }
  out.sasl = { mechanism, username: config.saslUsername, password: config.saslPassword };
  return out;
}

/** Read once at start: a renewed certificate takes a restart (the chart's secrets.reloader). */
function pemFile(variable: string, path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${variable} ${path} cannot be read (${(err as Error).message}); mount ${what} there`, {
      cause: err,
    });
  }
}
