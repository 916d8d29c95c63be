// What every Runtime must do, in terms of the Runtime interface alone: the
// contract the control plane relies on. A runtime (runc on this host today;
// pods or microVMs later) runs it with a factory of its own:
//
//   runtimeConformance('RuncRuntime', async () => ({ runtime, templateId, teardown }));
//
// Commands reach envd through envdEndpoint(), whichever kind it is.
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Process } from '@paddock/models';
import { RuntimeError, type HostAdmin, type Runtime } from '../src/index.js';

export interface ConformanceTarget {
  runtime: Runtime & HostAdmin;
  /** A template whose image has /bin/sh and a TCP listener we can start (busybox nc or python3). */
  templateId: string;
  teardown(): Promise<void>;
}

const TOKEN = 'conformance-token';

async function sh(runtime: Runtime, id: string, script: string): Promise<{ stdout: string; exitCode: number }> {
  const endpoint = runtime.envdEndpoint(id);
  const transport = createConnectTransport({
    baseUrl: 'socketPath' in endpoint ? 'http://sandbox' : `http://${endpoint.host}:${endpoint.port}`,
    httpVersion: '1.1',
    nodeOptions: 'socketPath' in endpoint ? { socketPath: endpoint.socketPath } : {},
    interceptors: [
      (next) => (req) => {
        req.header.set('x-access-token', TOKEN);
        req.header.set('authorization', `Basic ${Buffer.from('root:').toString('base64')}`);
        return next(req);
      },
    ],
  });
  const proc = createClient(Process, transport);
  const out: Uint8Array[] = [];
  let exitCode = NaN;
  for await (const res of proc.start({ process: { cmd: '/bin/sh', args: ['-c', script] }, stdin: false }, { timeoutMs: 30_000 })) {
    const ev = res.event?.event;
    if (ev?.case === 'data' && ev.value.output.case === 'stdout') out.push(ev.value.output.value);
    if (ev?.case === 'end') exitCode = ev.value.exitCode;
  }
  return { stdout: Buffer.concat(out).toString(), exitCode };
}

export function runtimeConformance(name: string, factory: () => Promise<ConformanceTarget>): void {
  describe(`Runtime conformance: ${name}`, () => {
    let t: ConformanceTarget;
    let runtime: Runtime & HostAdmin;
    const create = async () => (await runtime.create({ templateId: t.templateId, init: { accessToken: TOKEN } })).id;

    beforeAll(async () => {
      t = await factory();
      runtime = t.runtime;
    });
    afterAll(async () => {
      await t.teardown();
    });

    test('create gives a running sandbox that get() and list() show, with the template and its limits', async () => {
      const template = await runtime.getTemplate(t.templateId);
      expect(template).toBeDefined();
      const sb = await runtime.create({ templateId: t.templateId, init: { accessToken: TOKEN } });
      expect(sb).toMatchObject({ templateId: t.templateId, status: 'running', limits: template!.limits });
      expect(await runtime.get(sb.id)).toMatchObject({ id: sb.id, status: 'running' });
      expect((await runtime.list()).map((s) => s.id)).toContain(sb.id);
      expect((await sh(runtime, sb.id, 'echo hello')).stdout).toBe('hello\n');
      await runtime.destroy(sb.id);
    });

    test('unknown ids and templates are not_found; bad limits are invalid', async () => {
      expect(await runtime.get('doesnotexist00000000')).toBeUndefined();
      await expect(runtime.create({ templateId: 'no-such-template' })).rejects.toMatchObject({ kind: 'not_found' });
      await expect(runtime.create({ templateId: t.templateId, limits: { cpuCount: 0 } })).rejects.toMatchObject({ kind: 'invalid' });
      await expect(runtime.stop('doesnotexist00000000')).rejects.toBeInstanceOf(RuntimeError);
      await expect(runtime.destroy('doesnotexist00000000')).resolves.toBeUndefined();
    });

    test('pause freezes and resume thaws; each refuses the wrong state with conflict', async () => {
      const id = await create();
      await runtime.pause(id);
      expect((await runtime.get(id))?.status).toBe('paused');
      await expect(runtime.pause(id)).rejects.toMatchObject({ kind: 'conflict' });
      await runtime.resume(id);
      expect((await sh(runtime, id, 'echo back')).stdout).toBe('back\n');
      await expect(runtime.resume(id)).rejects.toMatchObject({ kind: 'conflict' });
      await runtime.destroy(id);
    });

    test('stop keeps the files and start boots again: new processes, a new boot id', async () => {
      const id = await create();
      await sh(runtime, id, 'echo kept > /root/kept');
      const boot = (await sh(runtime, id, 'cat /proc/sys/kernel/random/boot_id')).stdout;
      await runtime.stop(id);
      expect((await runtime.get(id))?.status).toBe('stopped');
      await runtime.start(id, { accessToken: TOKEN });
      expect((await sh(runtime, id, 'cat /root/kept')).stdout).toBe('kept\n');
      expect((await sh(runtime, id, 'cat /proc/sys/kernel/random/boot_id')).stdout).not.toBe(boot);
      await runtime.destroy(id);
      expect(await runtime.get(id)).toBeUndefined();
    });

    test('stats report the limits as totals', async () => {
      const sb = await runtime.create({ templateId: t.templateId, init: { accessToken: TOKEN } });
      const stats = await runtime.stats(sb.id);
      expect(stats.cpuCount).toBe(sb.limits.cpuCount);
      expect(stats.memTotal).toBe(sb.limits.memoryMB * 1024 * 1024);
      expect(stats.diskTotal).toBeGreaterThan(0);
      await runtime.destroy(sb.id);
    });

    test('a tunnel reaches a port inside the sandbox', async () => {
      const id = await create();
      // Serves one line on port 7000 inside, with python3 where the image has it, else busybox's nc.
      await sh(
        runtime,
        id,
        "if command -v python3 >/dev/null; then (python3 -c \"import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('127.0.0.1',7000));s.listen();c,_=s.accept();c.sendall(b'inside\\\\n')\" >/dev/null 2>&1 &); else (nc -l -p 7000 -e echo inside >/dev/null 2>&1 &); fi",
      );
      let got = '';
      for (let attempt = 0; attempt < 50 && !got; attempt++) {
        // Until the listener is up, the tunnel is refused (unavailable).
        const tunnel = await runtime.openTunnel(id, 7000).catch((err: RuntimeError) => {
          if (err.kind !== 'unavailable') throw err;
          return undefined;
        });
        if (tunnel) got = await new Promise<string>((resolve) => {
          let data = '';
          tunnel.on('data', (d: Buffer) => (data += d.toString()));
          tunnel.on('close', () => resolve(data));
          tunnel.on('error', () => resolve(data));
        });
        if (!got) await new Promise((r) => setTimeout(r, 100));
      }
      expect(got).toBe('inside\n');
      await expect(runtime.openTunnel(id, 70000)).rejects.toMatchObject({ kind: 'invalid' });
      await runtime.destroy(id);
    });

    test('snapshot makes a template with the files; it cannot be deleted while in use', async () => {
      const id = await create();
      await sh(runtime, id, 'echo snap > /root/snap.txt');
      const name = `conf-snap-${Date.now().toString(36)}`;
      const template = await runtime.snapshot(id, name);
      expect(template).toMatchObject({ id: name, parentId: t.templateId });
      const child = await runtime.create({ templateId: name, init: { accessToken: TOKEN } });
      expect((await sh(runtime, child.id, 'cat /root/snap.txt')).stdout).toBe('snap\n');
      await expect(runtime.deleteTemplate(name)).rejects.toMatchObject({ kind: 'conflict' });
      await runtime.destroy(child.id);
      await runtime.destroy(id);
      await runtime.deleteTemplate(name);
      expect(await runtime.getTemplate(name)).toBeUndefined();
    });

    test("a template keeps the config it is made with: a snapshot's, a derived one's; its processes run with it", async () => {
      const base = (await runtime.getTemplate(t.templateId))!;
      expect(base).toMatchObject({ imageId: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), config: { env: expect.any(Array) } });
      const id = await create();
      await sh(runtime, id, 'mkdir -p /srv/work && echo made > /srv/work/file');
      const suffix = Date.now().toString(36);
      const config = { env: [...base.config.env, 'CONF=snapshot'], user: 'root', workingDir: '/srv/work' };
      const snap = await runtime.snapshot(id, `conf-cfg-${suffix}`, { config });
      expect(snap).toMatchObject({ parentId: t.templateId, imageId: base.imageId, config });
      const derived = await runtime.deriveTemplate(`conf-der-${suffix}`, snap.id, { ...config, env: [...base.config.env, 'CONF=derived'], workingDir: '/' });
      expect(derived).toMatchObject({ parentId: snap.id, imageId: base.imageId, config: { workingDir: '/' } });
      const child = await runtime.create({ templateId: derived.id, init: { accessToken: TOKEN } });
      // envd's default directory and environment are the template's (sh() asks for root, as the config says).
      const ran = await sh(runtime, child.id, 'echo $CONF; cat /srv/work/file');
      expect(ran.stdout).toBe('derived\nmade\n');
      await expect(runtime.deriveTemplate(derived.id, snap.id, config)).rejects.toMatchObject({ kind: 'conflict' });
      await runtime.destroy(child.id);
      await runtime.destroy(id);
      await runtime.deleteTemplate(derived.id);
      await runtime.deleteTemplate(snap.id);
    });

    test('onExit tells of a sandbox whose init ended by itself; it is stopped with its files', async () => {
      const id = await create();
      const exited = new Promise<string>((resolve) => {
        const off = runtime.onExit((sandbox) => {
          if (sandbox !== id) return;
          off();
          resolve(sandbox);
        });
      });
      await sh(runtime, id, 'echo still > /root/still');
      // envd, the sandbox's init, ends on SIGTERM (a SIGKILL from inside its pid namespace never reaches it).
      await sh(runtime, id, 'kill -TERM 1').catch(() => undefined);
      expect(await exited).toBe(id);
      expect((await runtime.get(id))?.status).toBe('stopped');
      await runtime.start(id, { accessToken: TOKEN });
      expect((await sh(runtime, id, 'cat /root/still')).stdout).toBe('still\n');
      await runtime.destroy(id);
    });

    test('nothing is left on the host once every sandbox is gone', async () => {
      const id = await create();
      await runtime.destroy(id);
      // A runtime's own traces while it is in use are its own business; a sandbox's are not.
      expect((await runtime.leftovers()).filter((l) => l.includes(id))).toEqual([]);
    });
  });
}
