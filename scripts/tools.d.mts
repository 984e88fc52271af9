export declare const projectRoot: string;
export declare const toolsVenv: string;
export declare const temporalBinVersion: string;
export declare function onPath(program: string): string | null;
export declare function temporalBinary(): string | null;
export declare function lowestNodeVersion(): string;
export declare function lowestNodeDir(): string;
export declare function lowestNodeBin(): string | null;
