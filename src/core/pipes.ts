// Bigger pipes between the stages, through a tiny native addon (src/native/pipesize.c,
// built by `npm install`): Node has no fcntl.
import { addonPath, loadAddon } from './addons.js';

/** What a pipe next to a stage should hold: Linux's default pipe-max-size. */
export const PIPE_BYTES = 1 << 20;

/** The addon's path; built by `npm install` (node-gyp, from binding.gyp). */
export const PIPESIZE_ADDON = addonPath('pipesize');

type GrowPipe = (fd: number, bytes: number) => number;
let loaded: GrowPipe | null | undefined;

function addon(): GrowPipe | null {
  if (loaded === undefined) loaded = loadAddon<{ growPipe: GrowPipe }>('pipesize')?.growPipe ?? null;
  return loaded;
}

/**
 * Makes the pipe on `fd` hold at least `bytes` (never shrinks it). Returns its
 * capacity in bytes; or null when `fd` is not a pipe, the system or the user's
 * pipe limit refuses, or the addon was not built - the stage then works as
 * before, only slower in a chain.
 */
export function growPipe(fd: number, bytes = PIPE_BYTES): number | null {
  const fn = addon();
  if (!fn) return null;
  const r = fn(fd, bytes);
  return r > 0 ? r : null;
}
