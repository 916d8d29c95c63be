// What every page of a signed-in person uses: the session and the control
// API client that sends its CSRF token.
import type { ControlClient } from '@paddock/control-client';
import { createContext, useContext } from 'react';
import type { SessionInfo } from './session.js';

export interface Signed {
  session: SessionInfo;
  control: ControlClient;
}

export const SignedContext = createContext<Signed | undefined>(undefined);

export function useSigned(): Signed {
  const signed = useContext(SignedContext);
  if (!signed) throw new Error('useSigned outside a signed-in page');
  return signed;
}
