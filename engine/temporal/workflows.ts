/**
 * The Temporal workflows of cutover's distributed mode (`WORKFLOW_HOST`), as the worker's bundle
 * registers them (scripts/bundle-workflows.mjs bundles this file): every export is a workflow
 * type. Each workflow is a file of its own; what a client needs of them (ids, signals, queries,
 * updates, inputs) is workflow-definitions.ts.
 */
export { downWorkflow } from './down-workflow.js';
export { environmentWorkflow } from './environment-workflow.js';
export { migrationWorkflow } from './migration-workflow.js';
export { observeWorkflow } from './observe-workflow.js';
// The child that delivers what a migration's run left.
export { notifyWorkflow } from './workflow-notify.js';
