export declare function generatedBytes(total: number, chunkSize?: number, seed?: number): AsyncGenerator<Uint8Array>;

export declare function sha256Of(chunks: AsyncIterable<Uint8Array>): Promise<{ sha256: string; size: number }>;
