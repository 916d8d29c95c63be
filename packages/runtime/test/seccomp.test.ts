// The seccomp profile (seccomp/profile.json): what a sandbox process cannot
// ask the kernel for, tried from inside real sandboxes, and the ordinary work
// that still runs under it.
//
// The refused calls are made with python3's ctypes through libc's syscall().
// Many of them the kernel refuses by itself too, for want of a capability;
// EPERM from such a call shows nothing. So where the kernel validates
// something first, the arguments are ones it answers differently (ENOENT,
// EINVAL, EBADF, or ENOSYS where this kernel lacks the feature), and every
// test below has at least one call whose answer without the filter is not
// EPERM: each fails when the profile is taken out of the OCI configuration.
// Some calls (pivot_root, fsopen, reboot, swapon, acct...) check the
// capability first; for those the filter is a second wall that these tests
// cannot tell from the first.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeError } from '../src/runtime.js';
import { SECCOMP_PROFILE_PATH, loadSeccompProfile, sandboxSeccomp, seccompFor } from '../src/seccomp.js';
import { exec, testRuntime, TOKEN, type ExecResult, type TestRuntime } from './harness.js';

/** This host's syscall numbers (the sandbox runs the host's kernel and libc), from the C headers. */
const NR: Record<string, number> = Object.fromEntries(
  [...execFileSync('gcc', ['-dM', '-E', '-x', 'c', '-'], { input: '#include <sys/syscall.h>\n', encoding: 'utf8' }).matchAll(/^#define __NR_(\w+) (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]),
);

/**
 * Python run before each probe: `sc(name, *args)` makes a raw system call and
 * answers 'ok' or the errno's name; `fork_like` does the same for calls that
 * start a process and reaps the child. Results go into `out`.
 */
const PRELUDE = `
import ctypes, errno, json, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = json.loads('${JSON.stringify(NR)}')
out = {}
def arg(a):
    if isinstance(a, int): return ctypes.c_long(a)
    if isinstance(a, bytes): return ctypes.c_char_p(a)
    if a is None: return ctypes.c_void_p(None)
    return a
def raw(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[arg(a) for a in args])
    return r, ctypes.get_errno()
def sc(name, *args):
    r, e = raw(name, *args)
    return 'ok' if r >= 0 else errno.errorcode.get(e, str(e))
def fork_like(name, *args):
    r, e = raw(name, *args)
    if r == 0: os._exit(0)
    if r < 0: return errno.errorcode.get(e, str(e))
    os.waitpid(r, 0)
    return 'ok'
`;

let t: TestRuntime;
/** Two sandboxes: what one does must not reach the other. */
let a: string;
let b: string;

beforeAll(async () => {
  t = await testRuntime();
  const create = async () => (await t.runtime.create({ templateId: 'base', limits: { memoryMB: 512 }, init: { accessToken: TOKEN } })).id;
  [a, b] = await Promise.all([create(), create()]);
});
afterAll(async () => {
  await t.teardown();
});

async function run(id: string, script: string, user = 'user'): Promise<ExecResult> {
  return exec(t.runtime, id, script, { user, timeoutMs: 30_000 });
}

/** Runs `body` after the prelude as `user` and returns what it put in `out`. */
async function probe(id: string, body: string, user = 'user'): Promise<Record<string, string>> {
  const res = await run(id, `/usr/bin/python3 - <<'PY'\n${PRELUDE}\n${body}\nprint(json.dumps(out))\nPY`, user);
  if (res.exitCode !== 0) throw new Error(`probe as ${user} failed: ${JSON.stringify(res)}`);
  return JSON.parse(res.stdout.trim().split('\n').pop()!) as Record<string, string>;
}

/** Searches the host's user keyrings of `uid` for a "user" key; a key it finds is invalidated. */
function hostKeyring(description: string, uid: number): string {
  const script = `
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
keyctl, desc, uid = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
if uid:
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
found = []
for ring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
    key = libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(10), ctypes.c_long(ring), b'user', desc, ctypes.c_long(0))  # KEYCTL_SEARCH
    if key >= 0:
        libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(21), ctypes.c_long(key))  # KEYCTL_INVALIDATE
        found.append('found')
    else:
        found.append(errno.errorcode[ctypes.get_errno()])
print(' '.join(found))
`;
  return execFileSync('/usr/bin/python3', ['-c', script, String(NR.keyctl), description, String(uid)], { encoding: 'utf8', timeout: 10_000 }).trim();
}

describe('the profile file', () => {
  test('becomes linux.seccomp for x86_64 and aarch64 hosts: default EPERM, namespace flags masked out of clone, clone3 ENOSYS', () => {
    const profile = loadSeccompProfile(SECCOMP_PROFILE_PATH);
    const x64 = seccompFor(profile, 'x64');
    expect(x64).toMatchObject({ defaultAction: 'SCMP_ACT_ERRNO', defaultErrnoRet: 1, architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'] });
    expect(seccompFor(profile, 'arm64').architectures).toEqual(['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
    const rules = (name: string) => x64.syscalls.filter((r) => r.names.includes(name));
    expect(rules('clone')).toEqual([{ names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] }]);
    expect(rules('clone3')).toEqual([{ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 }]);
    expect(rules('socket')).toEqual([{ names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 40, valueTwo: 0, op: 'SCMP_CMP_NE' }] }]);
    expect(rules('personality').map((r) => r.args![0]!.value)).toEqual([0, 8, 0x20000, 0x20008, 0xffffffff]);
    // Refusals with the default errno need no rule of their own.
    for (const name of ['keyctl', 'unshare', 'mount', 'bpf', 'io_uring_setup']) expect(rules(name)).toEqual([]);
    expect(rules('ptrace')).toEqual([expect.objectContaining({ action: 'SCMP_ACT_ALLOW' })]);
    expect(rules('arch_prctl').length).toBe(1);
    expect(seccompFor(profile, 'arm64').syscalls.some((r) => r.names.includes('arch_prctl'))).toBe(false);
    expect(sandboxSeccomp()).toBe(sandboxSeccomp());
  });

  test('every syscall it names is one libseccomp knows, so none is dropped as unknown', () => {
    const names = JSON.stringify(seccompFor(loadSeccompProfile(SECCOMP_PROFILE_PATH), 'x64').syscalls.flatMap((r) => r.names));
    const refused = JSON.stringify(loadSeccompProfile(SECCOMP_PROFILE_PATH).refuse.flatMap((g) => g.syscalls));
    // runc resolves names through libseccomp and skips the ones it does not know.
    const script = `
import ctypes, json, sys
lib = ctypes.CDLL('libseccomp.so.2')
arches = [0xc000003e, 0x40000003, 0x4000003e, 0xc00000b7, 0x40000028]  # x86_64, x86, x32, aarch64, arm
unknown = [n for n in json.loads(sys.argv[1]) + json.loads(sys.argv[2]) if all(lib.seccomp_syscall_resolve_name_arch(a, n.encode()) < 0 for a in arches)]
print(json.dumps(unknown))
`;
    expect(JSON.parse(execFileSync('/usr/bin/python3', ['-c', script, names, refused], { encoding: 'utf8', timeout: 10_000 }))).toEqual([]);
  });

  test('a missing, malformed or contradictory profile is an error naming the file and the fault', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-seccomp-'));
    try {
      const missing = join(dir, 'missing.json');
      expect(() => loadSeccompProfile(missing)).toThrow(`seccomp profile '${missing}' cannot be read (ENOENT): sandboxes do not start without it; the runtime package is incomplete`);
      expect(() => loadSeccompProfile(missing)).toThrow(RuntimeError);
      const bad = join(dir, 'bad.json');
      writeFileSync(bad, '{"version": 1,');
      expect(() => loadSeccompProfile(bad)).toThrow(`seccomp profile '${bad}' is not JSON`);
      const profile = { name: 'p', version: 1, default: { errno: 'EPERM' }, allow: [{ group: 'g', reason: 'r', syscalls: ['read', 'keyctl'] }], allowWhen: [], refuse: [{ group: 'keys', reason: 'r', errno: 'EPERM', syscalls: ['keyctl'] }] };
      writeFileSync(bad, JSON.stringify(profile));
      expect(() => loadSeccompProfile(bad)).toThrow(`seccomp profile '${bad}': syscall 'keyctl' is in both allow[0] (g) and refuse[0] (keys): each syscall gets one rule`);
      writeFileSync(bad, JSON.stringify({ ...profile, refuse: [], default: { errno: 'EWHATEVER' } }));
      expect(() => loadSeccompProfile(bad)).toThrow(`seccomp profile '${bad}': default.errno is "EWHATEVER", not an errno name such as "EPERM"`);
      writeFileSync(bad, JSON.stringify({ ...profile, refuse: [], allowWhen: [{ syscall: 'socket', reason: 'r', argument: 0, not: { AF_VSOCK: 40, AF_ALG: 38 } }] }));
      expect(() => loadSeccompProfile(bad)).toThrow('allowWhen[0] (socket).not must hold exactly one value');
      expect(() => seccompFor(loadSeccompProfile(SECCOMP_PROFILE_PATH), 'ppc64')).toThrow("no seccomp filter for host architecture 'ppc64'");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('refused from inside a sandbox', () => {
  test('every sandbox process runs under the filter: envd (pid 1) and the commands it starts', async () => {
    const res = await run(a, 'grep -h "^Seccomp:" /proc/1/status /proc/self/status', 'root');
    expect(res.stdout).toBe('Seccomp:\t2\nSeccomp:\t2\n');
  });

  test('kernel keyring: add_key, keyctl and request_key get EPERM; a key added in sandbox A is in neither sandbox B nor the host keyrings', async () => {
    const desc = `paddock-seccomp-${randomBytes(6).toString('hex')}`;
    const add = `
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5
out['add_key @u'] = sc('add_key', b'user', b'${desc}', b'secret', 6, KEY_SPEC_USER_KEYRING)
out['add_key @us'] = sc('add_key', b'user', b'${desc}', b'secret', 6, KEY_SPEC_USER_SESSION_KEYRING)
out['keyctl get @u'] = sc('keyctl', 0, KEY_SPEC_USER_KEYRING, 1)
out['request_key'] = sc('request_key', b'user', b'${desc}', None, 0)
`;
    const search = `out['keyctl search @u'] = sc('keyctl', 10, -4, b'user', b'${desc}', 0)`;
    const inA = { user: await probe(a, add), root: await probe(a, add, 'root') };
    const inB = { user: await probe(b, search), root: await probe(b, search, 'root') };
    // Searched (and cleaned up, were anything there) before anything is asserted.
    const onHost = { root: hostKeyring(desc, 0), uid1000: hostKeyring(desc, 1000) };
    const refused = { 'add_key @u': 'EPERM', 'add_key @us': 'EPERM', 'keyctl get @u': 'EPERM', request_key: 'EPERM' };
    expect({ inA, inB, onHost }).toEqual({
      inA: { user: refused, root: refused },
      inB: { user: { 'keyctl search @u': 'EPERM' }, root: { 'keyctl search @u': 'EPERM' } },
      onHost: { root: 'ENOKEY ENOKEY', uid1000: 'ENOKEY ENOKEY' },
    });
  });

  test('namespaces: `unshare -Urm` fails as user and as root; unshare and setns get EPERM', async () => {
    const cmd = 'unshare -Urm sh -c "echo inside" 2>&1; echo "exit $?"';
    for (const user of ['user', 'root']) {
      const res = await run(a, cmd, user);
      expect(res.stdout).toBe('unshare: unshare failed: Operation not permitted\nexit 1\n');
    }
    const calls = `
out['unshare NEWUSER'] = sc('unshare', 0x10000000)
out['unshare NEWTIME'] = sc('unshare', 0x80)
out['setns'] = sc('setns', -1, 0)
`;
    const expected = { 'unshare NEWUSER': 'EPERM', 'unshare NEWTIME': 'EPERM', setns: 'EPERM' };
    expect(await probe(a, calls)).toEqual(expected);
    expect(await probe(a, calls, 'root')).toEqual(expected);
  });

  test('clone: namespace flags get EPERM, plain clone works; clone3 gets ENOSYS so that libc falls back to clone', async () => {
    const calls = `
SIGCHLD = 17
def clone3(flags):
    args = ctypes.create_string_buffer(64)  # struct clone_args, first version
    struct.pack_into('<QQQQQ', args, 0, flags, 0, 0, 0, SIGCHLD)
    return fork_like('clone3', args, 64)
out['clone'] = fork_like('clone', SIGCHLD, 0, None, None, 0)
for name, flag in [('NEWUSER', 0x10000000), ('NEWNS', 0x20000), ('NEWPID', 0x20000000), ('NEWNET', 0x40000000), ('NEWUSER|NEWNS', 0x10020000)]:
    out['clone ' + name] = fork_like('clone', flag | SIGCHLD, 0, None, None, 0)
out['clone3'] = clone3(0)
out['clone3 NEWUSER'] = clone3(0x10000000)
out['clone3 NEWTIME'] = clone3(0x80)
`;
    const expected = {
      clone: 'ok',
      'clone NEWUSER': 'EPERM',
      'clone NEWNS': 'EPERM',
      'clone NEWPID': 'EPERM',
      'clone NEWNET': 'EPERM',
      'clone NEWUSER|NEWNS': 'EPERM',
      clone3: 'ENOSYS',
      'clone3 NEWUSER': 'ENOSYS',
      'clone3 NEWTIME': 'ENOSYS',
    };
    expect(await probe(a, calls)).toEqual(expected);
    expect(await probe(a, calls, 'root')).toEqual(expected);
  });

  test('mounts: mount, umount2, pivot_root and the new mount API get EPERM, even as root', async () => {
    const calls = `
AT_FDCWD, BAD_FLAGS = -100, 0x80000000
out['mount'] = sc('mount', b'none', b'/nonexistent-paddock', b'tmpfs', 0, None)
out['umount2'] = sc('umount2', b'/', BAD_FLAGS)
out['pivot_root'] = sc('pivot_root', b'.', b'.')
out['fsopen'] = sc('fsopen', b'tmpfs', 0)
out['fsconfig'] = sc('fsconfig', -1, 0, None, None, 0)
out['fsmount'] = sc('fsmount', -1, 0, 0)
out['fspick'] = sc('fspick', AT_FDCWD, b'/', 0)
out['open_tree'] = sc('open_tree', AT_FDCWD, b'/', BAD_FLAGS)
out['move_mount'] = sc('move_mount', -1, b'', AT_FDCWD, b'/', 0)
out['mount_setattr'] = sc('mount_setattr', AT_FDCWD, b'/', BAD_FLAGS, None, 0)
`;
    const res = await probe(a, calls, 'root');
    expect(res).toEqual(Object.fromEntries(Object.keys(res).map((k) => [k, 'EPERM'])));
    expect(Object.keys(res).length).toBe(10);
  });

  test('io_uring: setup, enter and register get EPERM', async () => {
    const calls = `
params = ctypes.create_string_buffer(120)  # struct io_uring_params
out['io_uring_setup'] = sc('io_uring_setup', 8, params)
out['io_uring_enter'] = sc('io_uring_enter', -1, 0, 0, 0, None, 0)
out['io_uring_register'] = sc('io_uring_register', -1, 0, None, 0)
`;
    expect(await probe(a, calls)).toEqual({ io_uring_setup: 'EPERM', io_uring_enter: 'EPERM', io_uring_register: 'EPERM' });
  });

  test('bpf, perf_event_open and userfaultfd get EPERM', async () => {
    const calls = `
attr = ctypes.create_string_buffer(128)
out['bpf map_create'] = sc('bpf', 0, attr, 128)
out['bpf bad command'] = sc('bpf', 9999, attr, 128)
perf = ctypes.create_string_buffer(128)  # struct perf_event_attr: software CPU clock of this process, user space only
struct.pack_into('<IIQ', perf, 0, 1, 64, 0)
struct.pack_into('<Q', perf, 40, 1 | 32 | 64)  # disabled, exclude_kernel, exclude_hv
out['perf_event_open'] = sc('perf_event_open', perf, 0, -1, -1, 0)
out['userfaultfd'] = sc('userfaultfd', 1 | os.O_CLOEXEC)  # UFFD_USER_MODE_ONLY, open to unprivileged callers
`;
    const expected = { 'bpf map_create': 'EPERM', 'bpf bad command': 'EPERM', perf_event_open: 'EPERM', userfaultfd: 'EPERM' };
    expect(await probe(a, calls)).toEqual(expected);
    expect(await probe(a, calls, 'root')).toEqual(expected);
  });

  test('kernel modules, kexec and reboot get EPERM, even as root', async () => {
    const calls = `
out['init_module'] = sc('init_module', None, 0, b'')
out['finit_module'] = sc('finit_module', -1, b'', 0)
out['delete_module'] = sc('delete_module', b'paddock_none', 0)
out['kexec_load'] = sc('kexec_load', 0, 0, None, 0)
out['kexec_file_load'] = sc('kexec_file_load', -1, -1, 0, b'', 0)
out['reboot'] = sc('reboot', 0, 0, 0, None)
`;
    const res = await probe(a, calls, 'root');
    expect(res).toEqual({ init_module: 'EPERM', finit_module: 'EPERM', delete_module: 'EPERM', kexec_load: 'EPERM', kexec_file_load: 'EPERM', reboot: 'EPERM' });
  });

  test('setting the clock gets EPERM, even as root; adjtimex still reads it', async () => {
    const calls = `
ts = ctypes.create_string_buffer(16)
struct.pack_into('<qq', ts, 0, 1, 0)
out['clock_settime bad clock'] = sc('clock_settime', 99, ts)
out['clock_settime realtime'] = sc('clock_settime', 0, ts)
tv = ctypes.create_string_buffer(16)
struct.pack_into('<qq', tv, 0, 1, 2000000)  # an invalid timeval
out['settimeofday'] = sc('settimeofday', tv, None)
tx = ctypes.create_string_buffer(512)  # struct timex
out['clock_adjtime'] = sc('clock_adjtime', 99, tx)
out['adjtimex read'] = sc('adjtimex', tx)
struct.pack_into('<I', tx, 0, 0x0001)  # ADJ_OFFSET: refused by the kernel, as the sandbox lacks CAP_SYS_TIME
out['adjtimex set'] = sc('adjtimex', tx)
`;
    expect(await probe(a, calls, 'root')).toEqual({
      'clock_settime bad clock': 'EPERM',
      'clock_settime realtime': 'EPERM',
      settimeofday: 'EPERM',
      clock_adjtime: 'EPERM',
      'adjtimex read': 'ok',
      'adjtimex set': 'EPERM',
    });
  });

  test('host administration and raw access: open_by_handle_at, lookup_dcookie, quotactl, swapon, acct, syslog, iopl and ioperm get EPERM, even as root', async () => {
    const calls = `
handle = ctypes.create_string_buffer(16)
struct.pack_into('<Ii', handle, 0, 8, 1)
out['open_by_handle_at'] = sc('open_by_handle_at', -1, handle, 0)
out['lookup_dcookie'] = sc('lookup_dcookie', 0, None, 0)
out['quotactl'] = sc('quotactl', (0x800001 << 8) | 7, b'/', 0, None)  # Q_SYNC with an invalid quota type
out['swapon'] = sc('swapon', b'/nonexistent-paddock', 0)
out['acct'] = sc('acct', None)
out['syslog'] = sc('syslog', 10, None, 0)  # SYSLOG_ACTION_SIZE_BUFFER
out['sethostname'] = sc('sethostname', b'x', 1)
if 'iopl' in NR:
    out['iopl'] = sc('iopl', 4)
    out['ioperm'] = sc('ioperm', 0x10000, 1, 1)
`;
    const res = await probe(a, calls, 'root');
    expect(res).toEqual(Object.fromEntries(Object.keys(res).map((k) => [k, 'EPERM'])));
    expect(Object.keys(res).length).toBe('iopl' in NR ? 9 : 7);
  });

  test('personality: only the harmless values', async () => {
    const calls = `
out['query'] = sc('personality', 0xffffffff)
out['PER_LINUX32'] = sc('personality', 0x0008)
out['UNAME26'] = sc('personality', 0x20000)
out['PER_LINUX'] = sc('personality', 0)
out['ADDR_NO_RANDOMIZE'] = sc('personality', 0x0040000)
out['READ_IMPLIES_EXEC'] = sc('personality', 0x0400000)
out['PER_BSD'] = sc('personality', 0x0006)
`;
    expect(await probe(a, calls)).toEqual({ query: 'ok', PER_LINUX32: 'ok', UNAME26: 'ok', PER_LINUX: 'ok', ADDR_NO_RANDOMIZE: 'EPERM', READ_IMPLIES_EXEC: 'EPERM', PER_BSD: 'EPERM' });
  });

  test('socket: AF_VSOCK gets EPERM; unix and inet sockets work', async () => {
    const calls = `
import socket
out['AF_VSOCK'] = sc('socket', 40, socket.SOCK_STREAM, 0)
out['AF_UNIX'] = sc('socket', socket.AF_UNIX, socket.SOCK_STREAM, 0)
out['AF_INET'] = sc('socket', socket.AF_INET, socket.SOCK_DGRAM, 0)
out['AF_INET6'] = sc('socket', socket.AF_INET6, socket.SOCK_STREAM, 0)
`;
    expect(await probe(a, calls)).toEqual({ AF_VSOCK: 'EPERM', AF_UNIX: 'ok', AF_INET: 'ok', AF_INET6: 'ok' });
  });

  // ptrace stays allowed (strace and gdb are ordinary work). What keeps
  // `user` away from root's processes is the kernel's own ptrace access
  // check, not the filter; the pid namespace hides everything outside.
  test('ptrace: `user` can trace its own processes (what strace and gdb do) but not root’s envd (pid 1)', async () => {
    // A child asks to be traced and stops itself; its parent sees it stopped, lets it go, and sees it exit.
    const traced = `python3 - <<'PY'
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    if libc.ptrace(0, 0, None, None) != 0: os._exit(3)  # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.WIFSTOPPED(status), status
libc.ptrace(7, pid, None, None)  # PTRACE_CONT
_, status = os.waitpid(pid, 0)
print('traced' if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else status)
PY`;
    const res = await run(a, traced);
    expect(res.stdout).toBe('traced\n');
    expect(await probe(a, "out['attach pid 1'] = sc('ptrace', 16, 1, 0, 0)  # PTRACE_ATTACH")).toEqual({ 'attach pid 1': 'EPERM' });
  });
});

describe('ordinary work under the profile', () => {
  test('python3: threads, a process pool, subprocess and a computation', async () => {
    const res = await run(
      a,
      `/usr/bin/python3 - <<'PY'
import concurrent.futures, hashlib, multiprocessing, subprocess, threading
done = []
threads = [threading.Thread(target=lambda i=i: done.append(hashlib.sha256(bytes(i) * 100000).hexdigest())) for i in range(8)]
for th in threads: th.start()
for th in threads: th.join(10)
print('threads', len(done))
with multiprocessing.Pool(2) as pool: print('pool', sum(pool.map(abs, range(-100, 100))))
with concurrent.futures.ThreadPoolExecutor(4) as ex: print('executor', sum(ex.map(lambda x: x * x, range(1000))))
print(subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True, timeout=10).stdout.strip())
print('sum', sum(i * i for i in range(10**6)))
PY`,
    );
    expect(res.stdout).toBe('threads 8\npool 10000\nexecutor 332833500\nsub\nsum 333332833333500000\n');
  });

  test("node (the host's /usr/bin/node): a worker thread, child_process, zlib and fs.watch", async () => {
    const script = `
const { Worker } = require('node:worker_threads');
const cp = require('node:child_process');
const fs = require('node:fs');
const zlib = require('node:zlib');
const os = require('node:os');
const path = require('node:path');
setTimeout(() => { console.log('timed out'); process.exit(2); }, 15000).unref();
const w = new Worker('require("node:worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
w.once('message', async (m) => {
  console.log('worker', m);
  await w.terminate();
  console.log(cp.execFileSync('sh', ['-c', 'echo child']).toString().trim());
  const gz = await new Promise((res, rej) => zlib.gzip(Buffer.alloc(1 << 20, 7), (e, b) => (e ? rej(e) : res(b))));
  console.log('gunzip', zlib.gunzipSync(gz).length);
  const dir = fs.mkdtempSync(path.join(os.homedir(), 'watch-'));
  const watcher = fs.watch(dir, (_event, name) => {
    if (watcher.seen) return;
    watcher.seen = true;
    console.log('watched', name);
    watcher.close();
    fs.rmSync(dir, { recursive: true });
  });
  fs.writeFileSync(path.join(dir, 'f'), 'x');
});
`;
    const res = await run(a, `cat > ~/t.cjs <<'JS'\n${script}\nJS\n/usr/bin/node ~/t.cjs`);
    expect(res.stdout).toBe('worker 42\nchild\ngunzip 1048576\nwatched f\n');
  });

  test('git: init, commit and log', async () => {
    const res = await run(
      a,
      `d=$(mktemp -d ~/git-XXXX) && cd "$d" && git init -q && git config user.email u@example.com && git config user.name U &&
       echo hi > f && git add f && git commit -qm first && echo there >> f && git commit -qam second && git log --format=%s && git status --porcelain`,
    );
    expect(res).toMatchObject({ exitCode: 0, stdout: 'second\nfirst\n' });
  });

  test('gcc: compiles and runs a C program with pthreads', async () => {
    const c = String.raw`
#include <pthread.h>
#include <stdio.h>
static long total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *work(void *arg) { for (int i = 0; i < 100000; i++) { pthread_mutex_lock(&lock); total += (long)arg; pthread_mutex_unlock(&lock); } return NULL; }
int main(void) {
  pthread_t t[4];
  for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(i + 1));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  printf("%ld\n", total);
  return 0;
}`;
    const res = await run(a, `d=$(mktemp -d ~/c-XXXX) && cat > "$d/t.c" <<'C'\n${c}\nC\ngcc -O1 -pthread -o "$d/t" "$d/t.c" && "$d/t"`);
    expect(res).toMatchObject({ exitCode: 0, stdout: '1000000\n' });
  });

  // The network is closed, so pip installs a wheel made here, with --no-index.
  // The venv borrows the system's pip (--system-site-packages) rather than
  // running ensurepip, which takes seconds.
  test('pip: installs a local wheel into a venv, offline', async () => {
    const res = await run(
      a,
      `d=$(mktemp -d ~/pip-XXXX) && cd "$d" && /usr/bin/python3 -m venv --without-pip --system-site-packages venv && /usr/bin/python3 - <<'PY'
import base64, hashlib, zipfile
files = {
    'hello_paddock/__init__.py': b'ANSWER = 42\\n',
    'hello_paddock-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: hello-paddock\\nVersion: 1.0\\n',
    'hello_paddock-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: paddock-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
digest = lambda b: 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()
record = ''.join(f'{n},{digest(b)},{len(b)}\\n' for n, b in files.items()) + 'hello_paddock-1.0.dist-info/RECORD,,\\n'
with zipfile.ZipFile('hello_paddock-1.0-py3-none-any.whl', 'w') as z:
    for n, b in files.items(): z.writestr(n, b)
    z.writestr('hello_paddock-1.0.dist-info/RECORD', record)
PY
venv/bin/python -m pip --version | cut -d' ' -f1 &&
venv/bin/python -m pip install -q --no-index --no-deps --disable-pip-version-check ./hello_paddock-1.0-py3-none-any.whl &&
venv/bin/python -c 'import hello_paddock; print(hello_paddock.ANSWER)' &&
venv/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -c hello-paddock`,
    );
    expect(res).toMatchObject({ exitCode: 0, stdout: 'pip\n42\n1\n' });
  });

  test('a PTY: script(1) and python3 pty.spawn get a terminal', async () => {
    const res = await run(a, `timeout 10 script -qc tty /dev/null; timeout 10 /usr/bin/python3 -c 'import pty; pty.spawn(["sh", "-c", "test -t 0 && echo is-a-tty"])'`);
    expect(res.stdout.replace(/\r/g, '')).toMatch(/^\/dev\/pts\/\d+\nis-a-tty\n$/);
  });

  test('inotify: a watch reports a write', async () => {
    const res = await run(
      a,
      `/usr/bin/python3 - <<'PY'
import ctypes, os, select, struct, tempfile
libc = ctypes.CDLL(None, use_errno=True)
d = tempfile.mkdtemp(dir=os.path.expanduser('~'))
fd = libc.inotify_init1(os.O_CLOEXEC)
assert fd >= 0, os.strerror(ctypes.get_errno())
assert libc.inotify_add_watch(fd, d.encode(), 0x2 | 0x100) >= 0  # IN_MODIFY | IN_CREATE
with open(os.path.join(d, 'f'), 'w') as f: f.write('x')
ready, _, _ = select.select([fd], [], [], 10)
data = os.read(fd, 4096) if ready else b''
mask = struct.unpack_from('iIII', data)[1] if data else 0
print('event', 'create' if mask & 0x100 else mask)
PY`,
    );
    expect(res.stdout).toBe('event create\n');
  });
});
