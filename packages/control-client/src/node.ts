// The Node build's client: template archives also from a path (read as a
// file-backed Blob, so a retry can send it again) and from a Node Readable.
import { openAsBlob } from 'node:fs';
import { Readable } from 'node:stream';
import { ControlClient as WebControlClient, type CallOptions, type TemplateFilesBody } from './control-client.js';

/** What the Node build's `uploadTemplateFiles` sends: the browser build's bodies, or a Node `Readable`. */
export type NodeTemplateFilesBody = TemplateFilesBody | Readable;

/**
 * Typed client of the control API, in Node: `uploadTemplateFiles` also takes a file's path or a Node `Readable`.
 * Same API as the browser build's otherwise.
 */
export class ControlClient extends WebControlClient {
  /**
   * PUTs a tar archive (gzip-compressed or not) to the upload URL that
   * `templateFileUpload` gave: a file's path, a Blob, or a stream (Web or
   * Node) of `size` bytes.
   */
  override uploadTemplateFiles(url: string, files: NodeTemplateFilesBody, size?: number, options?: CallOptions): Promise<void> {
    // archiveBody, below, is what reads it; the browser build's type has no Readable.
    return super.uploadTemplateFiles(url, files as TemplateFilesBody, size, options);
  }

  protected override async archiveBody(files: NodeTemplateFilesBody): Promise<Blob | ReadableStream<Uint8Array>> {
    if (typeof files === 'string') return openAsBlob(files);
    if (files instanceof Readable) return Readable.toWeb(files) as ReadableStream<Uint8Array>;
    return super.archiveBody(files);
  }
}
