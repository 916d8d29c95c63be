export { EgressProxy, type EgressDecision, type EgressProxyOptions } from './proxy.js';
export { SandboxResolver, type SandboxResolverOptions } from './resolver.js';
export { domainAllowed, judgeAddress, resolvable, type EgressRules, type Judgement } from './rules.js';
export { hostUpstreams, nameserversOf, parseUpstream, upstreamResolve, type Upstream, type UpstreamResolveOptions } from './upstreams.js';
