import { Module, type DynamicModule } from '@nestjs/common';
import { FakeLabelPrinter } from '../providers/fake-label.printer';
import { FakePaymentProvider } from '../providers/fake-payment.provider';
import { ProviderCalls } from '../providers/provider-calls';
import { JobActivityListener } from './job-activity.listener';
import { OrderSagaController } from './order-saga.controller';
import { OrderSagaJobs } from './order-saga.jobs';
import { OrderSagaService } from './order-saga.service';
import { ORDERS_MODULE_OPTIONS, type OrdersModuleOptions } from './orders.constants';
import { OrdersController } from './orders.controller';
import { OrdersJobs } from './orders.jobs';
import { OrdersService } from './orders.service';
import { OrdersTables } from './orders.tables';

/** Orders: the HTTP API, the `order.fulfill` and `order.saga` handlers, and the fake providers they call. */
@Module({})
export class OrdersModule {
  static register(options: OrdersModuleOptions): DynamicModule {
    return {
      module: OrdersModule,
      controllers: [OrdersController, OrderSagaController],
      providers: [
        { provide: ORDERS_MODULE_OPTIONS, useValue: options },
        OrdersTables,
        OrdersService,
        OrdersJobs,
        OrderSagaService,
        OrderSagaJobs,
        JobActivityListener,
        ProviderCalls,
        FakePaymentProvider,
        FakeLabelPrinter,
      ],
    };
  }
}
