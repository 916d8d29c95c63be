// An e2b program: snapshots and forks.
import { Sandbox, type SnapshotInfo } from 'e2b';

export async function main(): Promise<void> {
  const sbx = await Sandbox.create();
  await sbx.files.write('state.json', '{}');
  const snapshot: SnapshotInfo = await sbx.createSnapshot({ name: 'my-snapshot' });
  const viaStatic = await Sandbox.createSnapshot(sbx.sandboxId, { requestTimeoutMs: 120_000 });
  for (const s of await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 10 }).nextItems()) console.log(s.snapshotId, s.names);
  console.log(await sbx.listSnapshots().nextItems());
  const fromSnapshot = await Sandbox.create(snapshot.snapshotId);
  const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 });
  for (const fork of forks) {
    if (fork instanceof Error) console.error(fork.message);
    else await fork.kill();
  }
  const [one] = await Sandbox.fork(sbx.sandboxId);
  if (one && !(one instanceof Error)) console.log(await one.files.read('state.json'));
  console.log(await Sandbox.deleteSnapshot(viaStatic.snapshotId), await Sandbox.deleteSnapshot(snapshot.snapshotId));
  await fromSnapshot.kill();
  await sbx.kill();
}
