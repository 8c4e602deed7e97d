/**
 * Kafka with TLS and SASL against a real broker: scripts/kafka.sh starts one of its own here with a
 * SASL_SSL listener (a certificate made by openssl for 127.0.0.1, SCRAM-SHA-256 user `workauto`,
 * and OAUTHBEARER with the broker's unsecured-JWT validator) and an SSL listener that requires a
 * client certificate signed by a client CA (ssl.client.auth=required, as Strimzi's tls
 * authentication), so these run whatever KAFKA_BROKERS is.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '@workauto/logger';
import { eventually } from '@workauto/testing';
import { createTransport, isRetriableKafkaError, kafkaClientSecurity, type KafkaSecurityConfig } from './index.js';
import type { EventTransport, TransportMessage } from './transport.js';

const run = promisify(execFile);
const kafkaScript = fileURLToPath(new URL('../../../scripts/kafka.sh', import.meta.url));
const logger = createLogger('kafka-security-test', 'silent');
const PASSWORD = `scram-${randomBytes(6).toString('hex')}`;

describe('Kafka over SASL_SSL (real broker)', { timeout: 180_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'kafka-secure-'));
  const caFile = join(dir, 'ca.pem');
  const clientCaFile = join(dir, 'client-ca.pem');
  const env = {
    ...process.env,
    KAFKA_RUN_DIR: join(dir, 'run'),
    KAFKA_SECURE_KEYSTORE: join(dir, 'keystore.pem'),
    KAFKA_SCRAM_PASSWORD: PASSWORD,
    KAFKA_CLIENT_CA: clientCaFile,
  };
  let brokers = '';
  let mtlsBrokers = '';
  const transports: EventTransport[] = [];

  before(async () => {
    await selfSigned('/CN=127.0.0.1', join(dir, 'key.pem'), caFile, ['-addext', 'subjectAltName=IP:127.0.0.1']);
    writeFileSync(env.KAFKA_SECURE_KEYSTORE, readFileSync(join(dir, 'key.pem'), 'utf8') + readFileSync(caFile, 'utf8'));
    // Client certificates as Strimzi's User Operator issues them: a CA of its own, user.crt/user.key in PEM.
    await selfSigned('/CN=clients-ca', join(dir, 'client-ca.key'), clientCaFile);
    await clientCertificate('client-ca', 'user');
    await selfSigned('/CN=other-ca', join(dir, 'other-ca.key'), join(dir, 'other-ca.pem'));
    await clientCertificate('other-ca', 'stranger');
    const { stdout } = await run('bash', [kafkaScript, 'start'], { env, timeout: 120_000 });
    brokers = /KAFKA_SECURE_BROKERS=(\S+)/.exec(stdout)?.[1] ?? '';
    mtlsBrokers = /KAFKA_MTLS_BROKERS=(\S+)/.exec(stdout)?.[1] ?? '';
    assert.ok(brokers && mtlsBrokers, `the broker printed its SASL_SSL and mTLS addresses:\n${stdout}`);
  });

  const selfSigned = (subject: string, keyFile: string, certFile: string, extra: string[] = []) =>
    run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      subject,
      ...extra,
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ]);

  /** <name>.crt and <name>.key (PKCS#8 PEM), signed by the CA <ca>.pem / <ca>.key. */
  async function clientCertificate(ca: string, name: string): Promise<void> {
    await run('openssl', [
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      join(dir, `${name}.key`),
      '-out',
      join(dir, `${name}.csr`),
    ]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      join(dir, `${name}.csr`),
      '-CA',
      join(dir, `${ca}.pem`),
      '-CAkey',
      join(dir, `${ca}.key`),
      '-CAcreateserial',
      '-days',
      '2',
      '-out',
      join(dir, `${name}.crt`),
    ]);
  }

  after(async () => {
    for (const t of transports) await t.close().catch(() => undefined);
    await run('bash', [kafkaScript, 'stop'], { env }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  const transport = (security: KafkaSecurityConfig, extra: { createTopics?: boolean; brokers?: string } = {}) => {
    const t = createTransport({
      brokers,
      clientId: 'kafka-security-test',
      logger,
      namespace: `s${randomBytes(3).toString('hex')}.`,
      partitions: 1,
      security,
      ...extra,
    });
    transports.push(t);
    return t;
  };

  async function roundTrip(t: EventTransport): Promise<void> {
    const received: TransportMessage[] = [];
    const sub = await t.subscribe({
      groupId: 'roundtrip',
      topics: ['secure.test'],
      handle: async (batch) => void received.push(...batch),
    });
    await t.publish([{ topic: 'secure.test', key: 'k', value: Buffer.from('over tls'), headers: {} }]);
    try {
      await eventually('the message came back', () => received.length > 0, 30_000, 100);
    } finally {
      await sub.stop();
    }
    assert.equal(received[0]?.value.toString(), 'over tls');
  }

  it('publishes and consumes with SCRAM-SHA-256 over TLS, verifying the broker against KAFKA_TLS_CA_FILE', async () => {
    await roundTrip(
      transport({
        tls: true,
        tlsCaFile: caFile,
        saslMechanism: 'scram-sha-256',
        saslUsername: 'workauto',
        saslPassword: PASSWORD,
      }),
    );
  });

  it('is refused with a wrong SCRAM password', async () => {
    const t = transport({
      tls: true,
      tlsCaFile: caFile,
      saslMechanism: 'scram-sha-256',
      saslUsername: 'workauto',
      saslPassword: 'not-the-password',
    });
    await assert.rejects(t.ensureTopics(['secure.refused']), (err: unknown) => {
      assert.match((err as Error).message, /SASL|authentication|Authentication/);
      assert.equal(isRetriableKafkaError(err), false, 'a wrong password fails a start at once: waiting cannot fix it');
      return true;
    });
  });

  it('does not trust a broker whose certificate no configured CA signed', async () => {
    const t = transport({
      tls: true,
      saslMechanism: 'scram-sha-256',
      saslUsername: 'workauto',
      saslPassword: PASSWORD,
    });
    await assert.rejects(t.ensureTopics(['secure.untrusted']));
  });

  it('authenticates with OAUTHBEARER, reading the token from KAFKA_SASL_OAUTHBEARER_TOKEN_FILE', async () => {
    // The test broker validates unsecured JWTs (alg none); a real one checks the issuer's signature.
    const b64 = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${b64({ alg: 'none' })}.${b64({ sub: 'workauto', iat: now, exp: now + 3600 })}.\n`);
    await roundTrip(
      transport({ tls: true, tlsCaFile: caFile, saslMechanism: 'oauthbearer', oauthBearerTokenFile: tokenFile }),
    );
  });

  it('connects to a broker that requires client certificates with KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE', async () => {
    await roundTrip(
      transport(
        { tls: true, tlsCaFile: caFile, tlsCertFile: join(dir, 'user.crt'), tlsKeyFile: join(dir, 'user.key') },
        { brokers: mtlsBrokers },
      ),
    );
  });

  it('is refused by that broker without a client certificate, or with one its client CA did not sign', async () => {
    // The broker ends the handshake with a TLS alert (certificate required / unknown CA).
    const refused = /alert|certificate/i;
    await assert.rejects(
      transport({ tls: true, tlsCaFile: caFile }, { brokers: mtlsBrokers }).ensureTopics(['mtls.none']),
      refused,
    );
    await assert.rejects(
      transport(
        { tls: true, tlsCaFile: caFile, tlsCertFile: join(dir, 'stranger.crt'), tlsKeyFile: join(dir, 'stranger.key') },
        { brokers: mtlsBrokers },
      ).ensureTopics(['mtls.stranger']),
      refused,
    );
  });

  it('with KAFKA_CREATE_TOPICS=false creates nothing and names the missing topics', async () => {
    const t = transport(
      {
        tls: true,
        tlsCaFile: caFile,
        saslMechanism: 'scram-sha-256',
        saslUsername: 'workauto',
        saslPassword: PASSWORD,
      },
      { createTopics: false },
    );
    await assert.rejects(t.ensureTopics(['operator.owned']), (err: unknown) => {
      assert.match((err as Error).message, /operator\.owned do not exist; with KAFKA_CREATE_TOPICS=false/);
      assert.equal(isRetriableKafkaError(err), true, 'a start waits for the operator to create them');
      return true;
    });
  });
});

describe('kafkaClientSecurity', () => {
  it('refuses settings that would connect without what was asked for', () => {
    assert.throws(
      () => kafkaClientSecurity({ saslMechanism: 'scram-sha-512', saslUsername: 'u' }),
      /needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD/,
    );
    assert.throws(() => kafkaClientSecurity({ saslPassword: 'p' }), /without KAFKA_SASL_MECHANISM/);
    assert.throws(() => kafkaClientSecurity({ tlsCaFile: '/ca.pem' }), /set KAFKA_TLS=true/);
    assert.throws(() => kafkaClientSecurity({ saslMechanism: 'oauthbearer' }), /KAFKA_SASL_OAUTHBEARER_TOKEN_FILE/);
    assert.throws(() => kafkaClientSecurity({ tls: true, tlsCaFile: '/nonexistent/ca.pem' }), /cannot be read/);
    assert.throws(
      () => kafkaClientSecurity({ tls: true, tlsCertFile: '/user.crt' }),
      /KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE go together/,
    );
    assert.throws(
      () => kafkaClientSecurity({ tlsCertFile: '/user.crt', tlsKeyFile: '/user.key' }),
      /set KAFKA_TLS=true/,
    );
    assert.throws(
      () =>
        kafkaClientSecurity({ tls: true, tlsCertFile: '/nonexistent/user.crt', tlsKeyFile: '/nonexistent/user.key' }),
      /KAFKA_TLS_CERT_FILE \/nonexistent\/user.crt cannot be read/,
    );
    assert.deepEqual(kafkaClientSecurity({}), {});
    assert.deepEqual(kafkaClientSecurity({ tls: true }), { ssl: true });
  });
});
