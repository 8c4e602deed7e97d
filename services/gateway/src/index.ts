export { createGateway, type Gateway, type GatewayOptions } from './app.js';
export type { Route } from './routes.js';
