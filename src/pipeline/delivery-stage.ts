/**
 * The pseudo-stage under which a run's delivery (the push of its branch and its pull request, at the end of the run)
 * shows in the run's state, failures and waits, and which `retry`/`skip --stage push` name. One id for the workflow
 * and the `deliverRun` activity.
 */
export const DELIVERY_STAGE_ID = 'push';
