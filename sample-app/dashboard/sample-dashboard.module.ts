import { Module, type DynamicModule } from '@nestjs/common';
import { WorkhorseDashboardModule } from 'nestjs-workhorse/dashboard';
import { OperatorController } from './operator.controller';
import { sampleAuthorize } from './operator-access';
import { SAMPLE_DASHBOARD_OPTIONS, type SampleDashboardOptions } from './sample-dashboard.constants';

/**
 * The operator dashboard at `/workhorse`: read-only for everyone, job data and changes for
 * requests with the operator token (`GET /operator?token=...` once in a browser, or the
 * `x-operator-token` header). Changes are recorded with the actor `sample-operator`.
 */
@Module({})
export class SampleDashboardModule {
  static register(options: SampleDashboardOptions): DynamicModule {
    return {
      module: SampleDashboardModule,
      imports: [
        WorkhorseDashboardModule.forRoot({
          path: options.path,
          authorize: sampleAuthorize(options.operatorToken),
          actor: () => 'sample-operator',
        }),
      ],
      controllers: [OperatorController],
      providers: [{ provide: SAMPLE_DASHBOARD_OPTIONS, useValue: options }],
    };
  }
}
