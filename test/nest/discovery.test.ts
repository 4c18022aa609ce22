/**
 * Handler discovery: class, useFactory and useValue providers; `this` bound to the provider;
 * several types on one method and inherited handlers; start-up refusals for duplicate types
 * and for request-scoped or transient hosts; decorator validation at class definition.
 */
import { Inject, Injectable, Scope } from '@nestjs/common';
import { REQUEST } from '@nestjs/core';
import {
  Admin,
  JobHandler,
  OnWorkhorseEvent,
  Queue,
  WorkhorseConfigurationError,
  WorkhorseModule,
  type HandlerContext,
  type WorkerEventName,
} from 'nestjs-workhorse';
import { drainWorkhorse } from 'nestjs-workhorse/testing';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

class GreetingHandlers {
  constructor(private readonly greeting: string) {}

  @JobHandler('greet.factory')
  @JobHandler('greet.factory-alias')
  greet(payload: { name: string }, ctx: HandlerContext): { text: string; type: string } {
    return { text: `${this.greeting}, ${payload.name}`, type: ctx.type };
  }
}

class ValueHandlers {
  readonly suffix = '!';

  @JobHandler('shout.value', { queue: 'loud' })
  shout(payload: { text: string }): string {
    return payload.text.toUpperCase() + this.suffix;
  }
}

abstract class BaseHandlers {
  protected abstract readonly label: string;

  @JobHandler('inherited.run')
  run(): string {
    return this.label;
  }
}

@Injectable()
class ConcreteHandlers extends BaseHandlers {
  protected readonly label = 'from the subclass';
}

@Injectable()
class FirstOwner {
  @JobHandler('shared.type')
  handle(): void {}
}

@Injectable()
class SecondOwner {
  @JobHandler('shared.type')
  process(): void {}
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedHandlers {
  @JobHandler('scoped.run')
  run(): void {}
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientHandlers {
  @JobHandler('transient.run')
  run(): void {}
}

@Injectable()
class DependsOnRequest {
  constructor(@Inject(REQUEST) readonly request: unknown) {}

  @JobHandler('implicit.run')
  run(): void {}
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedSubscriber {
  @OnWorkhorseEvent('job.failed')
  onFailed(): void {}
}

const { db } = useTestDatabase();

beforeAll(async () => {
  quietNestLogs();
});

function moduleWith(providers: Parameters<typeof startModule>[0]['providers']) {
  return startModule({ imports: [WorkhorseModule.forRoot({ connectionString: db.url })], providers });
}

describe('discovery', () => {
  it('finds handlers on class, useFactory and useValue providers and calls them on their instance', async () => {
    const moduleRef = await moduleWith([
      { provide: 'GREETER', useFactory: () => new GreetingHandlers('Hello') },
      { provide: 'SHOUTER', useValue: new ValueHandlers() },
      ConcreteHandlers,
    ]);
    try {
      const queue = moduleRef.get(Queue);
      const admin = moduleRef.get(Admin);
      const ids = [
        await queue.enqueue('greet.factory', { name: 'Ada' }),
        await queue.enqueue('greet.factory-alias', { name: 'Bob' }),
        await queue.enqueue('shout.value', { text: 'hey' }),
        await queue.enqueue('inherited.run', {}),
      ];
      await drainWorkhorse(moduleRef);
      const jobs = await Promise.all(ids.map((id) => admin.getJob(id)));
      expect(jobs.map((job) => [job?.state, job?.queue, job?.result])).toEqual([
        ['succeeded', 'default', { text: 'Hello, Ada', type: 'greet.factory' }],
        ['succeeded', 'default', { text: 'Hello, Bob', type: 'greet.factory-alias' }],
        ['succeeded', 'loud', 'HEY!'],
        ['succeeded', 'default', 'from the subclass'],
      ]);
    } finally {
      await moduleRef.close();
    }
  });

  it('fails start-up on two handlers for one type, naming both classes and methods', async () => {
    const attempt = moduleWith([FirstOwner, SecondOwner]);
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
    await expect(attempt).rejects.toThrow('Two handlers for job type "shared.type": FirstOwner.handle and SecondOwner.process.');
  });

  it('counts one instance provided under two tokens once', async () => {
    const shared = new ValueHandlers();
    const moduleRef = await moduleWith([
      { provide: 'A', useValue: shared },
      { provide: 'B', useValue: shared },
      { provide: 'C', useExisting: 'A' },
    ]);
    await moduleRef.close();
  });

  it.each([
    ['a request-scoped provider', RequestScopedHandlers, '@JobHandler on RequestScopedHandlers.run: the provider is request-scoped,'],
    ['a transient provider', TransientHandlers, '@JobHandler on TransientHandlers.run: the provider is transient,'],
    [
      'a provider that depends on a request-scoped one',
      DependsOnRequest,
      'the provider is request-scoped (it depends on a request-scoped provider, which makes it request-scoped too)',
    ],
    ['an event subscriber on a request-scoped provider', RequestScopedSubscriber, '@OnWorkhorseEvent on RequestScopedSubscriber.onFailed'],
  ])('fails start-up for handlers on %s, saying why and what to do', async (_label, provider, message) => {
    const attempt = moduleWith([provider]);
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
    await expect(attempt).rejects.toThrow(message);
    await expect(attempt).rejects.toThrow('must live on singleton providers: move the method to a default-scoped provider');
  });
});

describe('decorator validation, when the class is defined', () => {
  it.each([
    ['an empty type', () => JobHandler(''), '@JobHandler on Probe.run: the job type ("") must be 1 to 128 characters'],
    ['an unknown option', () => JobHandler('x', { retries: 3 } as never), '@JobHandler on Probe.run: retries: is not a handler option (queue, schedule, transactional, retry)'],
    ['a bad queue', () => JobHandler('x', { queue: 'no spaces' }), 'the queue ("no spaces") must be 1 to 128 characters'],
    ['a bad transactional', () => JobHandler('x', { transactional: 'yes' } as never), '@JobHandler on Probe.run: transactional: must be true or false'],
    ['an unknown event', () => OnWorkhorseEvent('job.exploded' as WorkerEventName), '"job.exploded" is not a worker event'],
  ])('rejects %s', (_label, decorator, message) => {
    const apply = () => {
      class Probe {
        run(): void {}
      }
      const descriptor = Object.getOwnPropertyDescriptor(Probe.prototype, 'run') as PropertyDescriptor;
      decorator()(Probe.prototype, 'run', descriptor);
    };
    expect(apply).toThrow(WorkhorseConfigurationError);
    expect(apply).toThrow(message);
  });
});
