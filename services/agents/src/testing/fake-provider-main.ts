/**
 * A fake provider as a process of its own (FakeProviderProcess starts it): argv[2] is its options
 * as JSON; it prints {"url"} once it listens and stops on SIGTERM.
 */
import { FakeProvider, type FakeProviderOptions } from './fake-provider.js';

const options = JSON.parse(process.argv[2] ?? '{}') as FakeProviderOptions;
const fake = await FakeProvider.start({ ...options, control: true });
process.stdout.write(`${JSON.stringify({ url: fake.url })}\n`);
process.once('SIGTERM', () => void fake.stop().then(() => process.exit(0)));
