// How the `node` that runs the server should be started. The `paddock`
// executable carries these options in its `#!` line, and `npm start` and
// `npm run paddock` on their command lines; a CLI test keeps them in step.

/**
 * - `--initial-old-space-size=64`: the proxy moves file data in 64 KiB
 *   buffers that live outside V8's heap. On a heap as small as the
 *   server's (about 15 MB), V8's default limits then start a full
 *   incremental mark every few MiB of traffic, and the marks free almost
 *   nothing. Measured through the proxy, 1 MiB requests one after another:
 *   about 100 mark-compacts per GiB and 2.5-3.6 ms of server CPU per
 *   request without it; one mark-compact in all and 1.2-1.4 ms with it.
 *   Resident memory under that load is the same, about 140 MB, either way.
 */
export const serverNodeFlags: readonly string[] = ['--initial-old-space-size=64'];
