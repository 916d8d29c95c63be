export declare const API_KEY_SHAPE: RegExp;
export declare function storedTokens(home: string): Promise<string[]>;
export declare function auditLog(file: string, secrets?: string[]): Array<Record<string, unknown>>;
