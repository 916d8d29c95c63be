// The runtime conformance suite (conformance.ts) against RuncRuntime.
import { runtimeConformance } from './conformance.js';
import { testRuntime } from './harness.js';

runtimeConformance('RuncRuntime', async () => {
  const t = await testRuntime();
  return { runtime: t.runtime, templateId: 'base', teardown: () => t.teardown() };
});
