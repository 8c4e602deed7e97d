/** For other workspaces' tests: https servers on loopback that an egress policy trusts (extraCaCertificates). */
export { TEST_CERTIFICATE, TEST_PRIVATE_KEY } from './test-certificate.js';
