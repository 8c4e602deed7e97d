-- Resource filters were stored but never enforced: a member with {"project": "x"} on notes could
-- read every note of the domain. The API now refuses non-empty filters; the ones stored before are
-- cleared here (access is exactly what it was, the level on the whole domain). No CHECK yet: the
-- previous release's pods still write during a rolling upgrade, and a constraint would fail them
-- (docs/operations.md, Upgrades); the release after this one may add it.
UPDATE access_policies SET resource_filter = '{}' WHERE resource_filter <> '{}';

-- Pending (and past) invitations hand their policies to the member on claim: drop their filters too.
UPDATE invitations
   SET access_policies = (SELECT coalesce(jsonb_agg(p - 'resource_filter' ORDER BY n), '[]')
                            FROM jsonb_array_elements(access_policies) WITH ORDINALITY AS e(p, n))
 WHERE jsonb_path_exists(access_policies, '$[*].resource_filter');
