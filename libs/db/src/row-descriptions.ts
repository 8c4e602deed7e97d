/**
 * A prepared statement's result described once per connection.
 *
 * pg sends Bind, Describe, Execute and Sync for every execution of a named statement, so PostgreSQL
 * builds a RowDescription each time and pg parses it again: every column's name decoded and its
 * type parser looked up (5 % of notes-tasks' CPU per GET /notes/{id}). A named statement's result
 * shape is fixed once PostgreSQL has parsed it on a connection (it refuses to execute a statement
 * whose result type a schema change altered). So the first execution on a connection keeps the
 * description PostgreSQL sent, and later executions of that statement on that connection send Bind,
 * Execute and Sync only and reuse it (pgx, Go's driver, does the same). The columns' parsers and
 * the empty row pg copies for each row are kept with it: pg would build them again per execution.
 *
 * The description lives beside pg's own record of the statements a connection has parsed, and
 * only text-format executions that read every row use it: anything else (binary results, a `rows`
 * limit, unnamed statements) runs as pg runs it.
 */
import pg from 'pg';

/** pg's RowDescription message, as its parser hands it to the query. */
interface RowDescription {
  fields: unknown[];
}

/** What of pg's connection this reads and writes (pg/lib/connection.js). */
interface Connection {
  parsedStatements: Record<string, string | undefined>;
  bind(config: { portal: string; statement: string; values: unknown; binary: boolean; valueMapper: unknown }): void;
  close(config: { type: 'S'; name: string }): void;
  sync(): void;
  [DESCRIBED]?: Map<string, RowDescription>;
}

/** What of pg's Result this reads and replaces (pg/lib/result.js). */
interface Result {
  fields: unknown[];
  _types: unknown;
  _parsers: unknown[] | undefined;
  _prebuiltEmptyResultObject: object | null;
  addFields(fields: unknown[]): void;
}

/** What addFields makes of a kept description's columns, for the client's type parsers it was made with. */
interface ResultShape {
  types: unknown;
  parsers: unknown[] | undefined;
  emptyRow: object | null;
}

/** What of pg's Query this reads and replaces (pg/lib/query.js). */
interface Query {
  name?: string;
  text?: string;
  values?: unknown;
  rows?: number;
  binary?: boolean;
  portal: string;
  prepare(connection: Connection): void;
  handleRowDescription(msg: RowDescription): void;
  handleError(err: unknown, connection: Connection): void;
  _getRows(connection: Connection, rows: number | undefined): void;
  _result: Result;
  [DESCRIBING]?: Connection;
}

const DESCRIBED = Symbol('workauto.described');
const DESCRIBING = Symbol('workauto.describing');

let installed = false;

/** Makes every pg Query of this process reuse a named statement's description (idempotent). */
export function describeStatementsOnce(): void {
  if (installed) return;
  installed = true;
  const { Query, Result } = pg as unknown as { Query: { prototype: Query }; Result: { prototype: Result } };
  const proto = Query.prototype;
  const prepare = proto.prepare;
  const handleRowDescription = proto.handleRowDescription;
  const addFields = Result.prototype.addFields;
  /** By a kept description's columns (the same array at every execution). */
  const shapes = new WeakMap<unknown[], ResultShape>();
  // pg's own helper for bind values (dates, buffers, arrays), the one its prepare passes.
  const { prepareValue } = (pg as unknown as { utils?: { prepareValue: unknown } }).utils ?? {};
  if (
    typeof prepare !== 'function' ||
    typeof handleRowDescription !== 'function' ||
    typeof addFields !== 'function' ||
    typeof prepareValue !== 'function'
  )
    throw new Error('pg changed: its Query or Result no longer has what libs/db row-descriptions.ts replaces');

  proto.prepare = function (this: Query, connection: Connection): void {
    const name = this.name;
    if (!name || this.rows || this.binary) return prepare.call(this, connection);
    const described = connection.parsedStatements[name] === this.text ? connection[DESCRIBED]?.get(name) : undefined;
    if (!described) {
      // pg parses (if needed), binds and describes: the description that comes back is kept.
      this[DESCRIBING] = connection;
      return prepare.call(this, connection);
    }
    try {
      connection.bind({
        portal: this.portal,
        statement: name,
        values: this.values,
        binary: false,
        valueMapper: prepareValue,
      });
    } catch (err) {
      // As pg does when a value cannot be sent: nothing runs, the connection stays usable.
      connection.close({ type: 'S', name });
      connection.sync();
      this.handleError(err, connection);
      return;
    }
    handleRowDescription.call(this, described);
    this._getRows(connection, undefined);
  };

  proto.handleRowDescription = function (this: Query, msg: RowDescription): void {
    const connection = this[DESCRIBING];
    handleRowDescription.call(this, msg);
    if (connection && this.name) {
      this[DESCRIBING] = undefined;
      (connection[DESCRIBED] ??= new Map()).set(this.name, msg);
      const result = this._result;
      shapes.set(msg.fields, {
        types: result._types,
        parsers: result._parsers,
        emptyRow: result._prebuiltEmptyResultObject,
      });
    }
  };

  Result.prototype.addFields = function (this: Result, fields: unknown[]): void {
    const shape = shapes.get(fields);
    // The parsers come from the client's types: another client's (or another pg instance's) build their own.
    if (!shape || shape.types !== this._types) return addFields.call(this, fields);
    this.fields = fields;
    this._parsers = shape.parsers;
    this._prebuiltEmptyResultObject = shape.emptyRow;
  };
}
