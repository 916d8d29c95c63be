export declare const CODE_INTERPRETER_CONTEXT: string;
export declare const CODE_INTERPRETER_TEMPLATE: string;
export declare const CODE_INTERPRETER_MEMORY_MB: number;
/** The API key of servers on the kept data directory (the compat harness's). */
export declare const CODE_INTERPRETER_API_KEY: string;
/** The server data directory kept for code-interpreter builds, or a new one when another process holds it. */
export declare function codeInterpreterHome(): { home: string; kept: boolean };
/** Runs `paddock template build` of the code-interpreter-v1 template against a server; resolves with how long it took, ms. */
export declare function buildCodeInterpreter(opts: { apiUrl: string; apiKey: string; onLine?: (line: string) => void }): Promise<number>;
