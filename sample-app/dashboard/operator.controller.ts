import { Controller, ForbiddenException, Get, Inject, Query, Res } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { SAMPLE_DASHBOARD_OPTIONS, type SampleDashboardOptions } from './sample-dashboard.constants';
import { OPERATOR_COOKIE, sameToken } from './operator-access';

/**
 * `GET /operator?token=...`: with the right token, gives this browser the operator cookie and
 * opens the dashboard, which then shows job data and allows changes. The token is printed at
 * start-up (or set with SAMPLE_OPERATOR_TOKEN).
 */
@Controller('operator')
export class OperatorController {
  constructor(@Inject(SAMPLE_DASHBOARD_OPTIONS) private readonly options: SampleDashboardOptions) {}

  @Get()
  signIn(@Query('token') token: string | undefined, @Res() response: ServerResponse): void {
    if (!sameToken(token, this.options.operatorToken)) throw new ForbiddenException('wrong operator token');
    response.statusCode = 303;
    response.setHeader('Set-Cookie', `${OPERATOR_COOKIE}=${encodeURIComponent(token)}; Path=/; HttpOnly; SameSite=Strict`);
    response.setHeader('Location', `${this.options.path}/`);
    response.end();
  }
}
