// Commands that the SDK composes for bash in the sandbox (git, template
// steps, ready checks): every argument that comes from the caller is quoted.

/** One word for bash, whatever it holds: single-quoted, with each `'` closed, escaped and reopened. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** A command line of separate words, each quoted. */
export function shellCommand(words: readonly string[]): string {
  return words.map(shellQuote).join(' ');
}
