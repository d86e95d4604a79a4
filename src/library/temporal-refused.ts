import { InvalidRequestError } from '../errors.js';
import { SEARCH_ATTRIBUTES } from '../contracts/search-attributes.js';

/*
 * A request Temporal refused (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION) that no error of our
 * own covers, said under its code. One refusal has a known fix: a namespace of a cluster made without the project's
 * search attributes refuses every start ("Namespace default has no mapping defined for search attribute
 * AgentPipeline"), so the message gives the command that creates them.
 */

/** How a self-hosted server says a namespace lacks a search attribute. */
const MISSING_ATTRIBUTE = /Namespace (\S+) has no mapping defined for search attribute (\S+)/;

/** The error of a refusal whose gRPC `details` are given. */
export function temporalRefused(details: string, cause: unknown): InvalidRequestError {
  const missing = MISSING_ATTRIBUTE.exec(details);
  if (!missing) return new InvalidRequestError('TEMPORAL_REFUSED', `[TEMPORAL_REFUSED] Temporal refused the request: ${details}`, { cause });
  const [, namespace, attribute] = missing;
  const flags = SEARCH_ATTRIBUTES.map((key) => `--name ${key.name} --type ${typeFlag(key.type)}`).join(' ');
  return new InvalidRequestError(
    'TEMPORAL_REFUSED',
    `[TEMPORAL_REFUSED] namespace ${namespace} has no search attribute ${attribute}, which runs are listed by; create the ` +
      `project's search attributes once per namespace: temporal operator search-attribute create --namespace ${namespace} ${flags} ` +
      "(docs/deployment.md, \"Search attributes on a self-hosted cluster\"; `agent-pipeline dev` creates them itself)",
    { cause },
  );
}

/** A search attribute type as the `temporal` CLI spells it: `KEYWORD_LIST` is `KeywordList`. */
function typeFlag(type: string): string {
  return type
    .split('_')
    .map((word) => word.charAt(0) + word.slice(1).toLowerCase())
    .join('');
}
