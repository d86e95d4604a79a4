import { stripVTControlCharacters } from 'node:util';

/*
 * Text a run brings (an agent's answer, a command's output, a warning quoting either, a transcript) is printed to an
 * operator's terminal by the CLI and the worker's text log. Left raw, its escape sequences would act there: clear the
 * screen, rewrite lines already printed (hiding a warning), set the window title, write the clipboard (OSC 52), or
 * make links that say one thing and open another. Printed text therefore keeps no terminal control: escape sequences
 * are dropped, and any other control character is shown as its symbol, so that nothing is hidden either.
 */

/** C0 controls but tab and newline, DEL, and the C1 controls. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` with no terminal control left in it: escape sequences dropped, other control characters shown as symbols. */
export function terminalSafe(text: string): string {
  const plain = stripVTControlCharacters(text.replaceAll('\r\n', '\n'));
  return plain.replace(CONTROL, controlPicture);
}

/** The symbol of a control character: U+2400 onwards for C0 (␛ for escape), ␡ for DEL, � for C1. */
function controlPicture(char: string): string {
  const code = char.charCodeAt(0);
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  return code === 0x7f ? '\u2421' : '\ufffd';
}
