import path from 'node:path';

const INLINE_MAP = /\n\/\/# sourceMappingURL=data:application\/json;charset=utf-8;base64,([A-Za-z0-9+/=]+)\s*$/;

/**
 * Rewrites the inline source map webpack puts at the end of a workflow bundle so it names no place on the build
 * machine: webpack writes each module's absolute path, which would ship in the package (and change its build id from
 * one machine to the next). Sources become relative to `bundleDir` (`../src/workflows/…`), a dependency's path
 * starts at its `node_modules/` folder wherever that was linked from, and the map keeps the sources' text, so it
 * resolves without them. The text of generated modules names the project's folder (`projectRoot`, and any folder in
 * `linkedRoots` its node_modules is linked from) relative to the bundle too.
 */
export function relativizeInlineSourceMap(code: string, projectRoot: string, bundleDir: string, linkedRoots: readonly string[] = []): string {
  const match = INLINE_MAP.exec(code);
  if (!match) return code;
  const map = JSON.parse(Buffer.from(match[1], 'base64').toString('utf8')) as { sources: string[]; sourcesContent?: (string | null)[]; sourceRoot?: string };
  // The entry module the SDK generates requires the workflows by absolute path; its text is in the map too. Any
  // folder the project's node_modules is linked from (`linkedRoots`) stands for the project itself.
  const up = `${path.relative(bundleDir, projectRoot).split(path.sep).join('/')}/`;
  const roots = [projectRoot, ...linkedRoots].map((root) => `${root.replace(/[\\/]+$/, '')}/`).sort((a, b) => b.length - a.length);
  const relativize = (text: string): string => roots.reduce((t, root) => t.split(root).join(up), text);
  // A module webpack ignored is named `ignored|<absolute folder>|<request>`.
  map.sources = map.sources.map((source) => relativize(relativeSource(source, projectRoot, bundleDir)));
  map.sourcesContent = map.sourcesContent?.map((text) => (text === null ? text : relativize(text)));
  map.sourceRoot = '';
  const encoded = Buffer.from(JSON.stringify(map), 'utf8').toString('base64');
  return `${code.slice(0, match.index)}\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${encoded}\n`;
}

function relativeSource(source: string, projectRoot: string, bundleDir: string): string {
  if (!path.isAbsolute(source)) return source;
  const dependency = source.lastIndexOf(`${path.sep}node_modules${path.sep}`);
  const local = dependency >= 0 ? path.join(projectRoot, source.slice(dependency + 1)) : source;
  return path.relative(bundleDir, local).split(path.sep).join('/');
}
