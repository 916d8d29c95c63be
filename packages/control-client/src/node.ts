// The Node build's client: template archives also from a path (read as a
// file-backed Blob, so a retry can send it again) and from a Node Readable.
import { openAsBlob } from 'node:fs';
import { Readable } from 'node:stream';
import { ControlClient as WebControlClient, type TemplateFilesBody } from './control-client.js';

/**
 * Typed client of the control API, in Node: `uploadTemplateFiles` also takes a file's path or a Node `Readable`.
 * Same API as the browser build's otherwise.
 */
export class ControlClient extends WebControlClient {
  protected override async archiveBody(files: TemplateFilesBody): Promise<Blob | ReadableStream<Uint8Array>> {
    if (typeof files === 'string') return openAsBlob(files);
    if (files instanceof Readable) return Readable.toWeb(files) as ReadableStream<Uint8Array>;
    return super.archiveBody(files);
  }
}
