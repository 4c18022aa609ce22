/**
 * Tests that need something this machine may lack (an executable, the product documents beside
 * the repository) run only where it is present, and otherwise skip saying why: the reason is
 * part of the skipped test's name, which the run's summary lists (skipped-tests-reporter.js).
 * A requirement that CI must meet fails there instead of skipping: under `CI=true` a missing
 * PgBouncer is an error, so a CI machine without it cannot pass by skipping the suite.
 */
export interface Requirement {
  /** Whether the machine has it. */
  met: boolean;
  /** What is missing and how to get it, e.g. "the `pgbouncer` executable is not installed (apt-get install pgbouncer)". */
  missing: string;
  /** Under CI=true, fail instead of skipping. */
  requiredInCi?: boolean;
}

const inCi = process.env.CI === 'true';

function skipReason(requirement: Requirement): string {
  return `(SKIPPED: ${requirement.missing})`;
}

/** `describe` when the requirement is met; otherwise a skipped describe named with the reason, or a failure in CI. */
export function describeIf(requirement: Requirement, name: string, body: () => void): void {
  if (requirement.met) {
    describe(name, body);
  } else if (requirement.requiredInCi && inCi) {
    describe(name, () => {
      it('has what it needs (CI=true does not allow skipping it)', () => {
        throw new Error(`${requirement.missing}; under CI=true this suite must run, not skip.`);
      });
    });
  } else {
    describe.skip(`${name} ${skipReason(requirement)}`, body);
  }
}

/** `it` when the requirement is met; otherwise a skipped test named with the reason, or a failure in CI. */
export function itIf(requirement: Requirement, name: string, test: jest.ProvidesCallback, timeoutMs?: number): void {
  if (requirement.met) {
    it(name, test, timeoutMs);
  } else if (requirement.requiredInCi && inCi) {
    it(name, () => {
      throw new Error(`${requirement.missing}; under CI=true this test must run, not skip.`);
    });
  } else {
    it.skip(`${name} ${skipReason(requirement)}`, test);
  }
}
