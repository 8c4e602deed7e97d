import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { ConnectionOptions } from 'node:tls';
import type { SASLOptions } from 'kafkajs';

/** How a service authenticates to Kafka: the KAFKA_TLS* and KAFKA_SASL_* variables (libs/config kafkaVars). */
export interface KafkaSecurityConfig {
  tls?: boolean | undefined;
  tlsCaFile?: string | undefined;
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
  if (config.tlsCaFile && !config.tls)
    throw new Error('KAFKA_TLS_CA_FILE is set but KAFKA_TLS is not true; set KAFKA_TLS=true to connect with TLS');
  if (config.tls) {
    let ca: string | undefined;
    if (config.tlsCaFile) {
      try {
        ca = readFileSync(config.tlsCaFile, 'utf8');
      } catch (err) {
        throw new Error(
          `KAFKA_TLS_CA_FILE ${config.tlsCaFile} cannot be read (${(err as Error).message}); mount the CA certificate there`,
        );
      }
    }
    out.ssl = ca ? { ca: [ca] } : true;
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
  out.sasl = { mechanism, username: config.saslUsername, password: config.saslPassword } as SASLOptions;
  return out;
}
