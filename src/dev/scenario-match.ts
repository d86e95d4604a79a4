import type { Rule, Scenario, Turn } from './scenario.js';

/*
 * Chooses the scripted turn for a Messages API request, statelessly: the rule is the first whose
 * `match` occurs in the first user message, the turn index is the number of assistant messages
 * already in the conversation. A tool-use loop therefore advances by itself, and a resumed
 * session (`claude --resume`) carries on where it stopped.
 */

/** The rule and turn chosen for a request. */
export type TurnSelection =
  | {
      kind: 'turn';
      /** Index into `scenario.rules`, or `undefined` for the fallback turn. */
      ruleIndex: number | undefined;
      ruleName: string;
      /** The conversation's turn index (assistant messages so far). */
      turnIndex: number;
      /** The scripted turn served; differs from `turnIndex` when `repeatLastTurn` applies. */
      scriptedIndex: number;
      turn: Turn;
    }
  | { kind: 'no-match'; message: string }
  | { kind: 'exhausted'; ruleIndex: number; ruleName: string; turnIndex: number; message: string };

interface MessageLike {
  role?: unknown;
  content?: unknown;
}

/** The text of the first `user` message: a string content, or its text blocks joined by newlines. */
export function firstUserText(messages: readonly unknown[]): string {
  const first = messages.find(
    (m): m is MessageLike => typeof m === 'object' && m !== null && (m as MessageLike).role === 'user',
  );
  if (!first) return '';
  if (typeof first.content === 'string') return first.content;
  if (!Array.isArray(first.content)) return '';
  return first.content
    .filter(
      (b): b is { type: 'text'; text: string } =>
        typeof b === 'object' && b !== null && b.type === 'text' && typeof b.text === 'string',
    )
    .map((b) => b.text)
    .join('\n');
}

/** The number of assistant messages already in the conversation. */
export function countAssistantMessages(messages: readonly unknown[]): number {
  return messages.filter((m) => typeof m === 'object' && m !== null && (m as MessageLike).role === 'assistant').length;
}

/** How a rule is named in logs and errors. */
export function describeRule(rule: Rule, index: number): string {
  if (rule.name) return rule.name;
  const match = typeof rule.match === 'string' ? JSON.stringify(rule.match) : `/${rule.match.regex}/${rule.match.flags ?? ''}`;
  return `rules[${index}] ${match}`;
}

function ruleMatches(rule: Rule, text: string): boolean {
  if (typeof rule.match === 'string') return text.includes(rule.match);
  return new RegExp(rule.match.regex, rule.match.flags).test(text);
}

/**
 * The start of the message, for a no-match error. Without Claude Code's `<system-reminder>` blocks: they come first
 * (its attribution guidance) and filled the whole preview, hiding the prompt a scenario author needs to match.
 */
function preview(text: string): string {
  const oneLine = text.replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, ' ').replace(/\s+/g, ' ').trim();
  return oneLine.length > 160 ? `${oneLine.slice(0, 160)}…` : oneLine;
}

/** Chooses what to answer a request with `messages` from `scenario`. */
export function selectTurn(scenario: Scenario, messages: readonly unknown[]): TurnSelection {
  const text = firstUserText(messages);
  const turnIndex = countAssistantMessages(messages);
  const ruleIndex = scenario.rules.findIndex((rule) => ruleMatches(rule, text));
  if (ruleIndex === -1) {
    if (scenario.fallback !== 'error') {
      return { kind: 'turn', ruleIndex: undefined, ruleName: 'fallback', turnIndex, scriptedIndex: 0, turn: scenario.fallback };
    }
    const rules = scenario.rules.map(describeRule).join(', ') || '(none)';
    return {
      kind: 'no-match',
      message:
        `no scenario rule matches this request (first user message: "${preview(text)}"). ` +
        `Rules: ${rules}. Add a matching rule or a \`fallback\` turn to the scenario.`,
    };
  }
  const rule = scenario.rules[ruleIndex];
  const ruleName = describeRule(rule, ruleIndex);
  const scripted = rule.turns.length;
  if (turnIndex >= scripted && !rule.repeatLastTurn) {
    return {
      kind: 'exhausted',
      ruleIndex,
      ruleName,
      turnIndex,
      message:
        `no more scripted turns for rule ${ruleName} (asked for turn ${turnIndex}, counting from 0; ` +
        `only ${scripted} scripted). Add turns or set \`repeatLastTurn: true\` on the rule.`,
    };
  }
  const scriptedIndex = Math.min(turnIndex, scripted - 1);
  return { kind: 'turn', ruleIndex, ruleName, turnIndex, scriptedIndex, turn: rule.turns[scriptedIndex] };
}
