import type { Connection } from '@temporalio/client';
import type { SearchAttributeType } from '@temporalio/common';
import { DevServerError, DevServerErrorCode } from './dev-server-error.js';

/** A search attribute to register: what `defineSearchAttributeKey` returns. */
export interface SearchAttributeDefinition {
  readonly name: string;
  readonly type: SearchAttributeType;
}

/**
 * Each search attribute type's `temporal server start-dev --search-attribute Name=Type` spelling, and the proto
 * IndexedValueType number the operator service speaks (temporal.api.enums.v1.IndexedValueType).
 */
export const ATTRIBUTE_TYPES: Record<SearchAttributeType, { flag: string; indexed: number }> = {
  TEXT: { flag: 'Text', indexed: 1 },
  KEYWORD: { flag: 'Keyword', indexed: 2 },
  INT: { flag: 'Int', indexed: 3 },
  DOUBLE: { flag: 'Double', indexed: 4 },
  BOOL: { flag: 'Bool', indexed: 5 },
  DATETIME: { flag: 'Datetime', indexed: 6 },
  KEYWORD_LIST: { flag: 'KeywordList', indexed: 7 },
};

/**
 * The server registers `--search-attribute`s only when it creates the database, so a `dbFile` from before an
 * attribute was added would silently lack it; add the missing ones through the operator service.
 * @throws {DevServerError} SEARCH_ATTRIBUTE_CONFLICT when an attribute is registered with another type
 */
export async function registerMissingAttributes(
  connection: Connection,
  namespace: string,
  attributes: readonly SearchAttributeDefinition[],
  dbFile: string | undefined,
): Promise<void> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing: Record<string, number> = {};
  for (const key of attributes) {
    const existing = customAttributes?.[key.name];
    const wanted = ATTRIBUTE_TYPES[key.type].indexed;
    if (existing === undefined || existing === null) {
      missing[key.name] = wanted;
    } else if (existing !== wanted) {
      throw new DevServerError(
        DevServerErrorCode.SEARCH_ATTRIBUTE_CONFLICT,
        `Search attribute ${key.name} is registered in ${dbFile ?? 'the database'} with indexed type ${existing}, but the project defines it as ${key.type}. ` +
          `Delete that database file (losing its workflows) or start with another dbFile.`,
      );
    }
  }
  if (Object.keys(missing).length > 0) await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
}
