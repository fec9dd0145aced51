// The design map's "may import" table as a lint rule: a room (one concept per folder) imports
// only the rooms beneath it, and only through their public face (index.ts). Tests may reach
// test support anywhere, so *.test.ts files are exempt.
import path from 'node:path';

/** Room → the rooms it may import. `lib/index.ts` is the package's face and may import any lib room. */
export const MAY_IMPORT = {
  'lib/util': [],
  'lib/transport': ['lib/util'],
  'lib/queue': ['lib/util'],
  'lib/cluster': ['lib/util', 'lib/transport'],
  'lib/informer': ['lib/util', 'lib/transport'],
  'lib/registry': ['lib/util', 'lib/transport', 'lib/cluster', 'lib/informer', 'lib/queue'],
  'lib/snapshot': ['lib/util', 'lib/transport', 'lib/cluster', 'lib/informer', 'lib/queue', 'lib/registry'],
  'lib/gitops': ['lib/util', 'lib/transport', 'lib/cluster'],
  'lib/pipeline': ['lib/util', 'lib/transport', 'lib/cluster', 'lib/informer', 'lib/queue', 'lib/registry', 'lib/gitops'],
  'lib/manager': ['lib/util', 'lib/transport', 'lib/cluster', 'lib/informer', 'lib/queue', 'lib/registry'],
  fixtures: ['lib/util'],
  cmd: ['lib/*'],
};

const LIB_ROOMS = Object.keys(MAY_IMPORT).filter((room) => room.startsWith('lib/'));

/** The room a repository-relative path lives in, or undefined outside the table. */
function roomOf(relative) {
  const parts = relative.split('/');
  if (parts[0] === 'lib') return parts.length > 2 ? `lib/${parts[1]}` : 'lib';
  return parts[0];
}

function allowed(from, to) {
  if (from === to) return true;
  if (from === 'lib') return to.startsWith('lib/');
  const rule = MAY_IMPORT[from];
  if (rule === undefined) return true; // e2e, bench, tools: anything
  return rule.some((allowedRoom) => allowedRoom === to || (allowedRoom === 'lib/*' && (to.startsWith('lib/') || to === 'lib')));
}

export const roomsRule = {
  meta: {
    type: 'problem',
    docs: { description: 'A room imports only the rooms the design map allows, through their index.ts' },
    schema: [],
  },
  create(context) {
    const root = context.cwd;
    const file = path.relative(root, context.filename);
    if (file.endsWith('.test.ts') || file.startsWith('..')) return {};
    const from = roomOf(file);
    function check(node) {
      const source = node.source?.value;
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const target = path.relative(root, path.resolve(path.dirname(context.filename), source));
      const to = roomOf(target);
      if (to === from) return;
      if (!allowed(from, to)) {
        context.report({ node: node.source, message: `${from}/ may not import ${to}/ (see the "may import" table in DESIGN.md)` });
        return;
      }
      if (LIB_ROOMS.includes(to) && from !== 'lib' && path.basename(target) !== 'index.ts') {
        context.report({ node: node.source, message: `import ${to}/ through its index.ts, not ${path.basename(target)}` });
      }
    }
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default { rules: { rooms: roomsRule } };
