import { Module, type DynamicModule } from '@nestjs/common';
import { FakeLabelPrinter } from '../providers/fake-label.printer';
import { FakePaymentProvider } from '../providers/fake-payment.provider';
import { ProviderCalls } from '../providers/provider-calls';
import { JobActivityListener } from './job-activity.listener';
import { ORDERS_MODULE_OPTIONS, type OrdersModuleOptions } from './orders.constants';
import { OrdersController } from './orders.controller';
import { OrdersJobs } from './orders.jobs';
import { OrdersService } from './orders.service';
import { OrdersTables } from './orders.tables';

/** Orders: the HTTP API, the `order.fulfill` handler, and the fake providers it calls. */
@Module({})
export class OrdersModule {
  static register(options: OrdersModuleOptions): DynamicModule {
    return {
      module: OrdersModule,
      controllers: [OrdersController],
      providers: [
        { provide: ORDERS_MODULE_OPTIONS, useValue: options },
        OrdersTables,
        OrdersService,
        OrdersJobs,
        JobActivityListener,
        ProviderCalls,
        FakePaymentProvider,
        FakeLabelPrinter,
      ],
    };
  }
}
