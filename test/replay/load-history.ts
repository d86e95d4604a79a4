import type { temporal } from '@temporalio/proto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

/*
 * Reads a history JSON file (as `temporal workflow show --output json` writes it) into a History message.
 *
 * Not the SDK's `historyFromJSON`: npm installs a separate protobufjs 8 under @temporalio/common and under
 * @temporalio/proto (the root copy is protobufjs 7, for @grpc/proto-loader), and the SDK's JSON reader checks
 * `instanceof Type` against the wrong copy ("type must be a Type"). Reading with the protobufjs that
 * @temporalio/proto itself was built with avoids that.
 */
const require = createRequire(import.meta.url);
const requireFromProto = createRequire(require.resolve('@temporalio/proto'));
const { fromJson } = requireFromProto('protobufjs/ext/protojson') as {
  fromJson(type: unknown, json: unknown, options: { ignoreUnknownFields: boolean }): temporal.api.history.v1.IHistory | null;
};
const { patchProtobufRoot } = require('@temporalio/proto/lib/patch-protobuf-root') as { patchProtobufRoot(root: unknown): { lookupType(name: string): unknown } };
const historyType = patchProtobufRoot(require('@temporalio/proto')).lookupType('temporal.api.history.v1.History');

/** Parses history JSON (a string or an already parsed object). @throws TypeError when it is not a history */
export function parseHistory(json: unknown): temporal.api.history.v1.IHistory {
  const history = fromJson(historyType, typeof json === 'string' ? JSON.parse(json) : json, { ignoreUnknownFields: true });
  if (!history?.events?.length) throw new TypeError('not a workflow history: expected {"events": [...]}');
  return history;
}

export async function readHistory(file: string): Promise<temporal.api.history.v1.IHistory> {
  return parseHistory(await readFile(file, 'utf8'));
}
