import type { Command } from 'commander';
import type { StageDefinition } from '../../pipeline/stage-schema.js';
import { EXIT } from '../errors.js';
import { printJson, printLine } from '../output.js';
import type { PipelineProblemReport } from '../../library/errors.js';

export function addValidateCommand(program: Command): void {
  program
    .command('validate')
    .description('check a pipeline file, the files it names and its template variables')
    .argument('<file>', 'pipeline YAML file')
    .option('--json', 'print {"file", "valid", "pipeline", "stages", "problems": [{file, line, column, field, message}], "notes": [...]}')
    .addHelpText('after', '\nNeeds no Temporal server. Exit code: 0 valid, 2 problems found (each names file, line and field).')
    .action(async (file: string, opts: { json?: boolean }) => {
      // Loaded here, as every command's own modules are: `--help` and the other commands need no parser or schema.
      const [{ validatePipeline }, { formatProblemLine }, describeStage] = await Promise.all([import('../../library/validate-pipeline.js'), import('../../pipeline/errors.js'), stageDescriber()]);
      const report = await validatePipeline(file);
      const valid = report.problems.length === 0;
      process.exitCode = valid ? EXIT.OK : EXIT.USAGE;
      if (opts.json) {
        return printJson({
          file,
          valid,
          pipeline: report.pipeline?.name ?? null,
          stages: report.pipeline?.stages.map((s) => s.id) ?? [],
          problems: report.problems.map(problemJson),
          notes: report.notes.map(problemJson),
        });
      }
      if (valid) {
        const { pipeline } = report;
        const inputs = Object.entries(pipeline!.inputs ?? {}).map(([k, v]) => (v.required ? `${k} (required)` : v.default !== undefined ? `${k}=${typeof v.default === 'string' ? v.default : JSON.stringify(v.default)}` : k));
        printLine(`✔ ${file}: pipeline "${pipeline!.name}" is valid`);
        printLine(`  stages: ${pipeline!.stages.map(describeStage).join(', ')}`);
        if (pipeline!.finally) printLine(`  finally: ${pipeline!.finally.map(describeStage).join(', ')}`);
        if (inputs.length) printLine(`  inputs: ${inputs.join(', ')}`);
        for (const n of report.notes) printLine(`  note: ${formatProblemLine(n)}`);
        return;
      }
      printLine(`✘ ${file}: ${report.problems.length} problem${report.problems.length === 1 ? '' : 's'}`);
      for (const p of report.problems) printLine(`  ${formatProblemLine(p)}`);
      for (const n of report.notes) printLine(`  note: ${formatProblemLine(n)}`);
    });
}

/** A problem or note in `validate --json`: every key always there, `null` where unknown. */
function problemJson(p: PipelineProblemReport): { file: string; line: number | null; column: number | null; field: string; message: string } {
  return { file: p.file, line: p.line ?? null, column: p.column ?? null, field: p.field, message: p.message };
}

/** Describes a stage in the summary: its id, `command` for a command stage, and what it runs after. */
async function stageDescriber(): Promise<(stage: StageDefinition) => string> {
  const [{ isCommandStage }, { needIds }] = await Promise.all([import('../../pipeline/command-stage.js'), import('../../pipeline/graph.js')]);
  return (stage) => {
    const facts = [...(isCommandStage(stage) ? ['command'] : []), ...(stage.needs?.length ? [`after ${needIds(stage).join(', ')}`] : [])];
    return facts.length ? `${stage.id} (${facts.join(', ')})` : stage.id;
  };
}
