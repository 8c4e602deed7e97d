/**
 * Handlers run in order as one Express layer, with Express's semantics for each: next() goes on,
 * next(err) (or a throw, or a rejected promise) leaves the chain for the error handlers.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';

export function inOneLayer(...handlers: RequestHandler[]): RequestHandler {
  return (req: Request, res: Response, done: NextFunction) => {
    let i = 0;
    const next = (err?: unknown): void => {
      // 'route' is a plain next() for a middleware layer, as in Express; 'router' leaves the chain too.
      if (err && err !== 'route') return done(err);
      const handler = handlers[i++];
      if (!handler) return done();
      try {
        const ret: unknown = handler(req, res, next);
        if (typeof (ret as PromiseLike<unknown> | undefined)?.then === 'function')
          (ret as PromiseLike<unknown>).then(undefined, (e: unknown) => next(e || new Error('Rejected promise')));
      } catch (e) {
        next(e);
      }
    };
    next();
  };
}
