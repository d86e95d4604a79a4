import type { Command } from 'commander';
import { addCancelCommand } from './cancel.js';
import { addCodecServerCommand } from './codec-server.js';
import { addDecisionCommands } from './decide.js';
import { addDeployCommands } from './deploy.js';
import { addDemoCommand } from './demo.js';
import { addDevCommand } from './dev.js';
import { addKeysCommands } from './keys.js';
import { addLimitsCommand } from './limits.js';
import { addListCommand } from './list.js';
import { addFinalAnswerCommand } from './final-answer.js';
import { addForkCommands } from './fork.js';
import { addLogsCommand } from './logs.js';
import { addPruneCommand } from './prune.js';
import { addScheduleCommands } from './schedule.js';
import { addStartCommand } from './start.js';
import { addStatusCommand } from './status.js';
import { addValidateCommand } from './validate.js';
import { addWatchCommand } from './watch.js';
import { addWorkerCommand } from './worker.js';

/** Registers every command of `agent-pipeline`, in the order `--help` lists them. */
export function addCommands(program: Command): void {
  addStartCommand(program);
  addWatchCommand(program);
  addStatusCommand(program);
  addListCommand(program);
  addLimitsCommand(program);
  addLogsCommand(program);
  addFinalAnswerCommand(program);
  addDecisionCommands(program);
  addForkCommands(program);
  addCancelCommand(program);
  addPruneCommand(program);
  addScheduleCommands(program);
  addValidateCommand(program);
  addKeysCommands(program);
  addWorkerCommand(program);
  addCodecServerCommand(program);
  addDeployCommands(program);
  addDevCommand(program);
  addDemoCommand(program);
}
