import { Injectable, Logger, Scope, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { HandlerContext } from '../core/context';
import type { WorkerEvent, WorkerEventName } from '../core/events';
import type { JobHandlerMetadata } from './job-handler.decorator';
import { JOB_HANDLER_METADATA, ON_WORKHORSE_EVENT_METADATA, TRANSACTION_HOST, TRANSACTIONAL_METADATA } from './workhorse.constants';
import { WorkhorseConfigurationError } from './workhorse-configuration.error';
import { WorkhorseRegistry } from './workhorse.registry';
import { WorkhorseScheduler } from './workhorse.scheduler';
import { inTransactionContext, WorkhorseTransactionHost } from './workhorse-transaction.host';
import { messages } from './workhorse.messages';

type Method = (...args: unknown[]) => unknown;

interface FoundMethod {
  name: string;
  method: Method;
}

// The method is looked up at call time, so wrappers installed on the instance later (spies) apply.
function callMethod(instance: object, name: string, ...args: unknown[]): unknown {
  return (instance as Record<string, Method>)[name](...args);
}

/**
 * Discovery, once every provider exists (`onModuleInit`): registers `@JobHandler` and
 * `@OnWorkhorseEvent` methods of singleton providers (and has the schedules they declare
 * checked), refuses them on request-scoped or transient ones, and gives every singleton provider and controller that has `@Transactional()`
 * methods its transaction host.
 */
@Injectable()
export class WorkhorseExplorer implements OnModuleInit {
  private readonly logger = new Logger('Workhorse');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly registry: WorkhorseRegistry,
    private readonly host: WorkhorseTransactionHost,
    private readonly scheduler: WorkhorseScheduler,
  ) {}

  onModuleInit(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) this.explore(wrapper, seen, true);
    for (const wrapper of this.discovery.getControllers()) this.explore(wrapper, seen, false);
    this.scheduler.check();
    this.logger.debug(`Found ${this.registry.handlers.length} job handler(s).`);
  }

  private explore(wrapper: InstanceWrapper, seen: Set<object>, isProvider: boolean): void {
    if (wrapper.isAlias) return;
    if (wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
      if (isProvider) this.refuseScoped(wrapper);
      return;
    }
    const instance: unknown = wrapper.instance;
    if (typeof instance !== 'object' || instance === null || seen.has(instance)) return;
    seen.add(instance);
    // For useFactory and useValue providers the wrapper's metatype is not the class: the instance knows it.
    const className = (instance.constructor as { name?: string } | undefined)?.name || String(wrapper.name);
    let transactional = false;
    for (const { name, method } of this.methodsOf(Object.getPrototypeOf(instance) as object | null)) {
      const target = `${className}.${name}`;
      if (isProvider) {
        for (const handler of this.reflector.get<JobHandlerMetadata[] | undefined>(JOB_HANDLER_METADATA, method) ?? []) {
          this.registry.addHandler({ ...handler, target, fn: this.handlerFn(instance, name, handler) });
        }
        for (const event of this.reflector.get<WorkerEventName[] | undefined>(ON_WORKHORSE_EVENT_METADATA, method) ?? []) {
          this.registry.addSubscriber({ event, target, invoke: (e: WorkerEvent) => callMethod(instance, name, e) });
        }
      }
      transactional ||= this.reflector.get<boolean | undefined>(TRANSACTIONAL_METADATA, method) === true;
    }
    if (transactional) Object.defineProperty(instance, TRANSACTION_HOST, { value: this.host, configurable: true });
  }

  // Handlers and subscribers need the one instance the worker calls; a scoped provider has none.
  private refuseScoped(wrapper: InstanceWrapper): void {
    const metatype = wrapper.metatype;
    if (wrapper.isFactory || typeof metatype !== 'function' || !metatype.prototype) return;
    const scope = wrapper.isTransient
      ? 'transient'
      : wrapper.scope === Scope.REQUEST
        ? 'request-scoped'
        : 'request-scoped (it depends on a request-scoped provider, which makes it request-scoped too)';
    for (const { name, method } of this.methodsOf(metatype.prototype as object)) {
      const decorator = this.reflector.get<unknown>(JOB_HANDLER_METADATA, method)
        ? 'JobHandler'
        : this.reflector.get<unknown>(ON_WORKHORSE_EVENT_METADATA, method)
          ? 'OnWorkhorseEvent'
          : null;
      if (decorator) throw new WorkhorseConfigurationError(messages.scopedHost(decorator, `${metatype.name}.${name}`, scope));
    }
  }

  private methodsOf(prototype: object | null): FoundMethod[] {
    if (prototype === null || prototype === Object.prototype) return [];
    const found: FoundMethod[] = [];
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const method = (prototype as Record<string, unknown>)[name];
      if (typeof method === 'function') found.push({ name, method: method as Method });
    }
    return found;
  }

  private handlerFn(instance: object, name: string, handler: JobHandlerMetadata) {
    const { host } = this;
    if (handler.transactional) {
      return (payload: unknown, ctx: HandlerContext): Promise<unknown> => {
        const client = ctx.client;
        if (!client) return Promise.reject(new WorkhorseConfigurationError(messages.transactionalHandlerWithoutClient(handler.type)));
        return host.runWith(client, () => callMethod(instance, name, payload, ctx));
      };
    }
    // A job runs outside any transaction context. The worker calls this in none (the common case,
    // every job), so the method is called directly, allocating nothing per job; `outside` (and its
    // closure) is needed only when a caller's context leaked in, e.g. a `runOnce` from a transaction.
    return (payload: unknown, ctx: HandlerContext): unknown =>
      inTransactionContext()
        ? host.outside(() => callMethod(instance, name, payload, ctx))
        : (instance as Record<string, Method>)[name](payload, ctx);
  }
}
