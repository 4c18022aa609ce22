/** nestjs-workhorse/typeorm against TypeORM 0.3 (the tests are in typeorm-adapter.ts). */
import * as typeorm from 'typeorm';
import { describeTypeOrmAdapter } from './typeorm-adapter';

describeTypeOrmAdapter('TypeORM 0.3', typeorm);
