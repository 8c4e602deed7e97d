export { createGateway, type Gateway, type GatewayOptions } from './app.js';
export type { Route, RouteInfo } from './routes.js';
export { corsAllowedOriginsVar } from './cors.js';
export { publicBaseUrlVar } from './public-url.js';
