import type { ESLint, Rule } from 'eslint';

export declare const MAY_IMPORT: Readonly<Record<string, readonly string[]>>;
export declare const roomsRule: Rule.RuleModule;
declare const plugin: ESLint.Plugin;
export default plugin;
