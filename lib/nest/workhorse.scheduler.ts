import { Inject, Injectable, Logger } from '@nestjs/common';
import { Admin } from '../core/admin';
import { Queue } from '../core/queue';
import { DEFAULT_SCHEDULE_NAMESPACE } from '../core/schedules/admin-calls';
import type { ScheduleDefinition } from '../core/schedules/types';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import type { WorkhorseModuleOptions } from './workhorse-module-options.interface';
import { WORKHORSE_MODULE_OPTIONS } from './workhorse.module-definition';
import { WorkhorseRegistry } from './workhorse.registry';
import { messages } from './workhorse.messages';

/**
 * This application's schedules (`forRoot({ schedules })` and `@JobHandler(type, { schedule })`),
 * checked once discovery is done (keys unique), and synced into `scheduleNamespace` on
 * application bootstrap, before the worker starts, as the desired state of that namespace
 * (`queue.syncSchedules`). It syncs when `syncSchedules` says so, by default when the process
 * runs a worker and declares a schedule: a web-only process, or an application that declares
 * none, leaves the namespace alone (it only warns about schedules it does not declare). The
 * workers' ticks fire the occurrences.
 */
@Injectable()
export class WorkhorseScheduler {
  private readonly logger = new Logger('Workhorse');

  constructor(
    @Inject(WORKHORSE_MODULE_OPTIONS) private readonly options: WorkhorseModuleOptions,
    private readonly registry: WorkhorseRegistry,
    private readonly queue: Queue,
    private readonly admin: Admin,
  ) {}

  /** The namespace this application's schedules belong to. */
  get namespace(): string {
    return this.options.scheduleNamespace ?? DEFAULT_SCHEDULE_NAMESPACE;
  }

  /** Every schedule this application declares: the module's, then the handlers'; keys unique. */
  get definitions(): ScheduleDefinition[] {
    const sources = new Map<string, string>();
    const declared = [
      ...(this.options.schedules ?? []).map((definition) => ({ definition, target: 'WorkhorseModule.forRoot' })),
      ...this.registry.schedules,
    ];
    return declared.map(({ definition, target }) => {
      const first = sources.get(definition.key);
      if (first !== undefined) throw new WorkhorseConfigurationError(messages.duplicateScheduleKey(definition.key, first, target));
      sources.set(definition.key, target);
      return definition;
    });
  }

  /** Called by discovery once it has found every handler: refuses keys declared twice. */
  check(): void {
    void this.definitions;
  }

  /** Called by `WorkhorseWorker` on application bootstrap, before its worker starts. */
  async syncOnBootstrap(): Promise<void> {
    const definitions = this.definitions;
    const sync = this.options.syncSchedules ?? (Boolean(this.options.worker) && definitions.length > 0);
    if (sync) {
      const synced = await this.queue.syncSchedules(this.namespace, definitions);
      const changes = synced.filter((s) => s.change !== 'unchanged').map((s) => `${s.key} ${s.change}`);
      if (changes.length > 0) this.logger.log(messages.schedulesSynced(this.namespace, changes.join(', ')));
    } else if (this.options.syncSchedules === undefined && this.options.worker && definitions.length === 0) {
      await this.warnAboutUndeclared();
    }
  }

  /**
   * Warns about active schedules of the namespace that this application does not declare. Only
   * a role with the operator capability may list schedules: for any other the warning is left
   * out (insufficient_privilege), not the start.
   */
  private async warnAboutUndeclared(): Promise<void> {
    let listed: Awaited<ReturnType<Admin['listSchedules']>>;
    try {
      listed = await this.admin.listSchedules({ namespace: this.namespace });
    } catch (error) {
      if ((error as { code?: unknown }).code === '42501') return;
      throw error;
    }
    const active = listed.filter((s) => s.state !== 'disabled');
    if (active.length > 0) this.logger.warn(messages.undeclaredSchedules(this.namespace, active.map((s) => s.key)));
  }
}
