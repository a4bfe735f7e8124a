export type { TicketDeskConnectorOptions } from './ticket-desk-connector.js'
export { createTicketDeskConnector, TICKET_DESK_TYPE } from './ticket-desk-connector.js'
export { createTicketDeskReceiver, TICKET_DESK_SIGNATURE_HEADER } from './ticket-desk-receiver.js'
