/** Certificates made at test time with `openssl` (a test dependency), made as the benches make theirs. */
export { fingerprintOf, makeCertificate, type TestCertificate } from '../../bench/certificates.js';
