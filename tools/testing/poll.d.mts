export declare const sleep: (ms: number) => Promise<void>;

/** Waits until `check` holds, asking every `everyMs` (100 unless given); fails naming `what` after `ms` (15 s unless given). */
export declare function eventually(check: () => boolean | Promise<boolean>, what: string, ms?: number, everyMs?: number): Promise<void>;
