import { type ProbeResult, ProbeStatus } from '@workauto/protos/workauto/agents/v1/agents.js';
import { probeCategories, type AgentsDeps, type Handler } from '../common.js';
import { probeCategory, probe, checkKeyRequest } from './common.js';

export function validateKey(deps: AgentsDeps): Handler<'validateKey'> {
  return async (req, ctx) => {
    const { provider, baseUrl } = checkKeyRequest(deps, req);
    const refusal = await probe(deps, provider, req.api_key, baseUrl, ctx.signal);
    if (!refusal) return { status: ProbeStatus.PROBE_STATUS_VALID, category: 0 } satisfies ProbeResult;
    return {
      status: ProbeStatus.PROBE_STATUS_INVALID,
      category: probeCategories.fromDomain(probeCategory(refusal.category)),
      message: refusal.message,
    };
  };
}
