/** Connect phase limit: a black-holed endpoint fails in 10 s instead of the OS's minutes. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Socket inactivity limit; without it a body that stalls after the headers hangs forever. */
export const READ_TIMEOUT_MS = 60_000;
