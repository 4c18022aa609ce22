/**
 * The Standard Schema interface (version 1): the small contract that zod (3.24+), valibot (1.0+),
 * arktype and others implement under the `~standard` key, so a library can validate with any of
 * them without depending on one. Written from the specification; only what `defineJob` uses.
 *
 * @example
 * const schema: StandardSchemaV1<unknown, { orderId: string }> = z.object({ orderId: z.string() });
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaProps<Input, Output>;
}

/** What a Standard Schema exposes under `~standard`. */
export interface StandardSchemaProps<Input, Output> {
  readonly version: 1;
  /** The library that made the schema, e.g. `zod`. */
  readonly vendor: string;
  /** Validates `value`: the (possibly transformed) value, or the issues found. May be async. */
  readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>;
  /** Types only: what the schema takes and gives. */
  readonly types?: { readonly input: Input; readonly output: Output } | undefined;
}

/** The outcome of `validate`: a value without issues, or issues. */
export type StandardSchemaResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: readonly StandardSchemaIssue[] };

/** One problem the validator found. */
export interface StandardSchemaIssue {
  readonly message: string;
  /** Where in the value, outermost first: keys, or segments with a `key`. */
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The type a Standard Schema takes. */
export type StandardSchemaInput<S extends StandardSchemaV1> = NonNullable<S['~standard']['types']>['input'];

/** The type a Standard Schema gives. */
export type StandardSchemaOutput<S extends StandardSchemaV1> = NonNullable<S['~standard']['types']>['output'];
