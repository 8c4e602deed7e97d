import pg from 'pg';
import { createLogger } from '@workauto/logger';
import { testDatabase, failure, testCallerKeys, TestClient } from '@workauto/testing';
import {
  CrmPipelinesServiceService as S,
  StageType,
} from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import { createCrmPipelinesService, type RunningService } from './app.js';

export { S };

/** crm-pipelines on a fresh database, called over real gRPC, with a direct SQL client for checks. */
export async function startCrm() {
  const databaseUrl = await testDatabase('crm');
  const service: RunningService = await createCrmPipelinesService(
    { databaseUrl, host: '127.0.0.1', port: 0, callerVerifyKeys: testCallerKeys.verifyKeys },
    createLogger('crm-pipelines', 'silent'),
  );
  const client = new TestClient('crm_pipelines', `127.0.0.1:${service.port}`, {
    volumeThreshold: 100_000,
    deadlineMs: 30_000,
  });
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  return {
    databaseUrl,
    client,
    db,
    async stop() {
      client.close();
      await db.end();
      await service.stop();
    },
  };
}

export { failure };

export const OPEN = StageType.STAGE_TYPE_OPEN;
export const WON = StageType.STAGE_TYPE_WON;
export const LOST = StageType.STAGE_TYPE_LOST;

/** The usual sales pipeline: Lead, Qualified, Proposal (open), Won, Lost. */
export const SALES_STAGES = [
  { name: 'Lead', stage_type: OPEN, default_confidence: 0.1 },
  { name: 'Qualified', stage_type: OPEN, default_confidence: 0.3 },
  { name: 'Proposal', stage_type: OPEN },
  { name: 'Won', stage_type: WON },
  { name: 'Lost', stage_type: LOST },
];

export { newTenant as tenant } from '@workauto/testing';
