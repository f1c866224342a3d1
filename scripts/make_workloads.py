"""Write the project-authored sample workloads summarization.jsonl, math.jsonl and rag.jsonl.

All passages, questions and documents below were written for this project (nothing is copied
from a public data set). The output is deterministic: request order, output lengths and the
templated math numbers come from numpy generators with fixed seeds, and arrivals are a seeded
Poisson process. Every request is greedy (temperature 0) with max_tokens = output_tokens.

code.jsonl and chat.jsonl are not touched: they date from the project's first commit.

Usage: python scripts/make_workloads.py [--out workloads]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# file stem: (content seed, arrival seed, mean arrival rate in requests/s)
SEEDS = {
    "summarization": (11, 101, 2.5),
    "math": (22, 202, 3.0),
    "rag": (33, 303, 3.0),
}

# --------------------------------------------------------------------------------------------
# Summarization: (kind, passage). Passages are 80-250 words.
# --------------------------------------------------------------------------------------------

PASSAGES: list[tuple[str, str]] = [
    ("meeting", """Platform team weekly sync, Tuesday. Attendees: Priya, Tomás, Wen, Aleksander (notes). Priya reported that the migration of the billing service to the new Kubernetes cluster is 80 percent done; the last two cron jobs still depend on a shared NFS mount and cannot move until the storage team provides a replacement. Tomás said storage promised an object-store bucket by Friday. Wen raised the on-call load: eleven pages last week, seven of them from the flaky disk-usage alert on the log hosts. The team agreed to raise that alert's threshold from 80 to 90 percent and to add a 15-minute hold before paging. Aleksander will write the change and Wen will review it. The quarterly load test moves from the 14th to the 21st because the staging database is being resized. Open question: whether to keep the old cluster running as a fallback for a month after cutover. Priya will estimate the cost before next week."""),
    ("meeting", """Riverside Primary parent council, March meeting. Eighteen parents and the deputy head attended. The treasurer reported 2,340 pounds raised at the winter fair, about 400 more than last year, mostly from the used-book stall. The council voted to spend 1,500 of it on outdoor play equipment for the reception class and to keep the rest for the year-six leavers' trip. The deputy head explained that the school cannot extend the after-school club to 6 p.m. because only two staff members are available; she asked whether parents would volunteer one afternoon a month, and six people signed up. Several parents complained about cars blocking the side gate at pickup time. The council will write to the local authority asking for a painted no-stopping zone. The next meeting is on the first Thursday of May, and the summer fete committee will meet separately in April."""),
    ("meeting", """Mobile app planning, sprint 42 kickoff. Goals for the next two weeks: ship offline mode for the shopping list, fix the crash on Android 11 when the camera permission is denied, and start the redesign of the settings screen. Offline mode is the priority; Jonas estimates six days, mostly for conflict handling when two devices edit the same list. Design has not finished the settings screen, so Marta will only build the navigation skeleton this sprint. QA asked for the crash fix to land before Wednesday so that it can ride in the 5.8.1 hotfix. Analytics shared that 31 percent of weekly users open the app without a network connection at least once, which supports the offline work. The team dropped the dark-mode icon refresh from the sprint. Retrospective action carried over from last sprint: announce API changes in the team channel before merging them, not after."""),
    ("meeting", """Lab meeting notes, 9 October. Dana presented preliminary results from the drought-stress experiment: seedlings of the two wild accessions kept 20 percent more leaf water than the reference line after ten days without watering, but the sample is only twelve plants per group. The group suggested repeating the experiment with at least thirty plants per group and randomizing tray positions, since the growth chamber is warmer near the door. Felix reported that the sequencing facility has a six-week backlog; he will send the RNA samples this week anyway. The shared confocal microscope is fully booked on Mondays, and people were asked to release slots they will not use by Friday noon. Reminder from the PI: abstracts for the spring conference are due on the 30th, and drafts should be circulated inside the lab a week before that."""),
    ("meeting", """Staff meeting at the Harbour Street kitchen, Monday before service. The head chef announced that the autumn menu starts on the 2nd: the crab linguine and the summer salad go, and a pumpkin risotto and a braised short-rib dish come in. Suppliers have confirmed prices for squash and short rib, and the beef dish will be priced at 24. Two line cooks are leaving at the end of the month, so the manager is interviewing on Thursday and asked staff to refer anyone suitable. The last health inspection scored well, but the inspector noted that the walk-in fridge temperature log had gaps on two weekends; the closing cook is now responsible for filling it in. Front of house asked the kitchen to announce sold-out dishes before 7 p.m. instead of during the rush. The team agreed to trial a new rota for three weeks."""),
    ("meeting", """Community call for the Lanternfish project, notes by Ines. Release 2.4 is feature-frozen; the only remaining blocker is a memory leak in the streaming parser that appears with files larger than 2 GB. Kofi has a fix under review and will add a regression test. The maintainers discussed dropping support for Python 3.8: download statistics show it at 4 percent of installs, and keeping it prevents the use of newer typing features. Decision: 2.4 is the last release to support 3.8, and this will be announced in the release notes. A new contributor offered to translate the documentation into Portuguese; the team welcomed the offer and pointed to the translation guide. The call also agreed to rotate triage duty weekly among five maintainers, starting with Ines. The next call is in two weeks at the same time."""),
    ("news", """The Millbrook Bridge will close to all vehicle traffic for eleven weeks starting 3 June while engineers replace its expansion joints and resurface the deck, the county roads department said on Thursday. The bridge, built in the 1960s, carries about 14,000 vehicles a day across the Tessel River and is the main link between the town centre and the northern estates. Pedestrians and cyclists will still be able to cross on a protected lane for most of the work, except on four weekends when the whole structure must be cleared. Drivers will be diverted over the Carrow Road bridge, which officials warn could add up to twenty minutes at peak times. The county will run an extra shuttle bus every fifteen minutes during rush hours. Businesses on Bridge Street have asked for compensation, saying footfall fell by a third the last time the bridge closed, in 2011. The council said it would consider a rates relief scheme at its July meeting."""),
    ("news", """Norvale Foods reported second-quarter revenue of 412 million euros, up 6 percent from a year earlier, as higher prices for its frozen ready meals made up for slightly lower volumes. Operating profit fell to 29 million from 33 million, squeezed by packaging and energy costs that the company said it could not fully pass on to supermarkets. Chief executive Helena Marsk said Norvale would close its oldest plant, in Lindau, by the end of next year and move production to a larger site that runs mostly on solar power. About 180 jobs are affected, and the company said most workers would be offered positions at the other site, forty kilometres away. Norvale kept its full-year guidance of 3 to 5 percent sales growth. Its shares fell 2 percent in early trading, and analysts said the margin pressure was larger than expected."""),
    ("news", """A team of marine biologists has fitted satellite tags to forty juvenile loggerhead turtles released off the coast of Calder Island, hoping to learn where the animals spend their first years at sea. Little is known about this so-called lost-years stage, when young turtles drift with ocean currents before returning to coastal feeding grounds. Early data from the first three months show that most of the turtles headed north-east with the main current, but six swam against it for days at a time, suggesting that they choose their routes more actively than scientists had assumed. The tags are solar-powered and should transmit for about a year before falling off. The project is funded by a regional conservation trust and involves students from the island's college, who will analyse the tracks as part of their coursework."""),
    ("news", """Westfield Rovers came from two goals down to draw 2-2 with league leaders Amberton on Saturday, keeping their hopes of a playoff place alive. Amberton dominated the first half and scored twice in eight minutes, first from a corner and then with a long-range shot that took a deflection. Rovers changed formation at half-time and brought on the eighteen-year-old winger Sam Okafor, who set up the first goal with a low cross in the 61st minute and won the penalty that levelled the score with five minutes left. Amberton's goalkeeper was booked for time-wasting shortly before the penalty. The result leaves Rovers seventh, one point behind the final playoff spot with four games remaining. Their manager praised the crowd and said the team had shown the character it lacked in the autumn."""),
    ("news", """Heavy rain over the weekend caused flooding in low-lying parts of the Dunmere valley, where the river rose more than two metres in 36 hours. Around sixty homes were evacuated as a precaution on Saturday night, and most families were able to return by Monday afternoon. The main road into the valley remains closed because of a landslip near the quarry, and a temporary route over farm tracks is open to residents only. The regional water authority said its new flood barrier at Ashby held back the worst of the water and protected the town centre, which flooded twice in 2019 before the barrier was built. Forecasters expect drier weather for the rest of the week but warn that the ground is saturated, so even moderate rain could cause new problems. Residents can report damage through the council's website."""),
    ("news", """The city of Port Heller has switched off the last of its sodium street lamps, completing a seven-year programme that replaced 21,000 lights with LED fittings. The council says the new lamps use about 60 percent less electricity and will save roughly 1.2 million a year once the loan for the project is repaid. Each lamp has a small controller that dims it to half brightness between midnight and 5 a.m. on residential streets and reports faults automatically, so repair crews no longer rely on complaints from residents. Not everyone is pleased: a local astronomy club says the whiter light washes out more of the night sky, and some residents say the dimming makes them feel less safe. The council has promised to review the dimming schedule after a year of data on accidents and crime."""),
    ("news", """The regional health board will offer free eye tests to all residents over sixty from January, extending a scheme that until now covered only people with diabetes or a family history of glaucoma. Officials said the change would cost about 3 million a year but could save more by catching conditions early, before they need surgery. Opticians will be paid a fixed fee per test and must refer patients with suspected glaucoma or macular degeneration to the hospital within two weeks. The opposition welcomed the plan but said that waiting times for hospital eye clinics, currently around five months, must come down first, or the extra referrals would simply lengthen the queue. The board said it was hiring four more consultants and opening an evening clinic to meet the demand."""),
    ("review", """I've used these noise-cancelling headphones for about three months, mostly on the train and in an open-plan office. The cancellation is excellent for low, steady noise like engines and air conditioning, but voices still come through more than I expected. Sound quality is warm with strong bass; I turned the bass down a notch in the app. Battery life is the best part: I charge them roughly once a week and get close to the advertised 35 hours. The ear cushions are comfortable for about two hours, after which my ears get warm. My complaints: the touch controls on the right ear cup trigger by accident when I adjust the headphones, and the case is bulky. Multipoint pairing with my laptop and phone works, though switching takes a few seconds. For the price I'd still recommend them, especially to commuters."""),
    ("review", """We bought this air fryer to replace an old one whose non-stick coating was peeling. It has a 5.5 litre basket, which is enough for chips for four people, though you need to shake it twice for even browning. It heats up quickly and cooks chicken thighs in about 22 minutes. The digital panel is easy to read, but the beeping is loud and cannot be turned off, which is annoying late in the evening. Cleaning is simple: the basket and tray go in the dishwasher and have come out fine so far. It is noisier than our previous model, roughly like a kitchen extractor fan on its middle setting. One star off for the short power cable, which forces us to keep it near the one socket by the kettle. Overall a solid four out of five."""),
    ("review", """I bought these boots for a two-week trek in the mountains and wore them for about 180 km in total. They needed very little breaking in: I did three short walks before the trip and had no blisters during it. Grip on wet rock was good, and the waterproof membrane kept my feet dry through two days of steady rain, although they took a full night to dry inside after I stepped into a stream. The sizing runs small, so order half a size up, especially if you wear thick socks. The laces are too short for the top hooks when you lace tightly. After the trip the soles show normal wear and the stitching is intact. They are heavier than trail shoes, which I noticed on long descents. I'd buy them again for multi-day hikes, but not for day walks."""),
    ("review", """I switched our small accounting firm to this invoicing app six months ago. Setting up clients and templates took an afternoon, and importing our old records from a spreadsheet worked after I fixed a few date formats. Automatic payment reminders are the feature that paid for itself: late invoices dropped noticeably in the first two months. The bank feed connects to two of our three banks; for the third we still upload statements by hand. Reporting is basic. You can see outstanding amounts and monthly totals, but not profit by client, which we need at year end. Support answered my emails within a day and were helpful, though chat is only available on weekdays. The price went up 15 percent at renewal with little notice, which annoyed me. Still, it is a big improvement on our old process."""),
    ("review", """Stayed three nights at this hotel for a conference. The location is its strongest point: five minutes' walk from the convention centre and the main station. The room was small but clean, with a good bed and blackout curtains. The air conditioning was noisy and I ended up switching it off at night. Breakfast was included and had decent variety, though the queue for the coffee machine at 8 a.m. was long and the hot dishes were lukewarm by then. Wi-Fi was fast enough for video calls in the room, but not in the lobby. Staff at reception were friendly and stored my bag on the last day. The gym is one treadmill and a rack of dumbbells in a basement room. For business travel at this price I'd stay again, but I would not choose it for a holiday."""),
    ("review", """We have played this cooperative board game about a dozen times with two to four players. Everyone works together to stop wildfires spreading across a map of forest tiles, spending action points to dig firebreaks, move water, and evacuate villages. The rules take about twenty minutes to learn; the rulebook is clear, but the icons on the cards are small. The difficulty is well judged: we lost our first four games and now win roughly half. With four players, one experienced person can end up directing everybody else, a common problem in cooperative games. The components are sturdy, and the wooden fire tokens are a nice touch. A game lasts 45 to 60 minutes, and it works best with three players. Recommended for families with children over ten."""),
    ("email", """From: Laura Chen. To: all staff. Subject: Office move on the 15th.
Hi all, our move to the fourth floor happens on Friday the 15th. Please pack your desk into the crates by Thursday 5 p.m. and label them with your name and your new desk number from the attached plan. IT will disconnect computers at 4 p.m. on Thursday.
Reply from Marco Ruiz: Will the lockers move too, or do we empty them? I have some equipment in mine.
Reply from Laura Chen: Lockers stay on the second floor until the week after; the new ones arrive on the 22nd. Please empty them by then, and bring any lab equipment to me so we can move it separately.
Reply from Deepa Nair: Is there parking for the removal van on Friday morning? Last time it blocked the delivery bay.
Reply from Laura Chen: Good point. I've booked the bay from 7 to 11 a.m. and told reception."""),
    ("email", """From: Owen Parks (Greenleaf Landscaping). To: Sara Liddell (Facilities). Subject: Spring maintenance contract.
Sara, attached is our quote for the spring season: weekly mowing, hedge trimming in April and June, and replanting the two front beds, for 6,800 in total, up from 6,200 last year because of fuel and labour costs.
Reply from Sara Liddell: Thanks, Owen. Our budget this year is 6,500. Could we drop the June hedge trim and do it ourselves, and would that bring it within budget?
Reply from Owen Parks: Dropping the June trim saves 450, so 6,350. I'd suggest keeping it, though; the hedges along the car park grow fast and cover the signs by July.
Reply from Sara Liddell: Understood. Let's go with 6,350 without the June trim, and I'll ask our caretaker to do it. Please send the revised contract and I'll sign it this week."""),
    ("email", """From: Kenji Watanabe. To: research group. Subject: Travel to the Lisbon workshop.
Hi everyone, the workshop is confirmed for 12-14 November. The department will pay for economy flights and up to three nights in the hotel block; please book by the 20th, after which the group rate expires.
Reply from Ana Souza: My talk is on the afternoon of the 14th. Can I stay a fourth night and fly back on the 15th?
Reply from Kenji Watanabe: Yes. If your talk is on the last day, the fourth night is covered. Add a note to your travel form.
Reply from Tobias Klein: I'm only attending the first day. Is it fine if I take the train instead of flying?
Reply from Kenji Watanabe: Of course; the train is preferred where the journey is under eight hours. Keep your tickets for the reimbursement claim. I'll circulate the schedule once the organizers publish it next week."""),
    ("email", """From: M. Okonjo. To: Bramblewear support. Subject: Wrong size delivered, order 55812.
Hello, I ordered the waterproof jacket in medium but received a large. I need it for a trip on the 3rd. Can you send the right size quickly?
Reply from Bramblewear Support (Chloe): I'm sorry about that. Medium is in stock, and I've sent it by express delivery today; it should arrive within two working days. Please return the large with the prepaid label in the parcel; there is no charge.
Reply from M. Okonjo: Thanks, the medium arrived and fits. But there was no return label in the first parcel.
Reply from Bramblewear Support (Chloe): Apologies again. I've emailed you a printable label, and as a thank-you for your patience I've refunded the original shipping cost of 4.95 to your card."""),
    ("email", """From: Rafael Duarte. To: Ingrid Holm. Subject: Translation project timeline.
Ingrid, the client has added two more chapters to the manual, about 9,000 words. At our current pace that pushes delivery from the 10th to the 18th. Can we bring in another translator?
Reply from Ingrid Holm: I can ask Petra; she translated their previous manual and knows the terminology. With her we could split the new chapters and deliver on the 13th. Her rate is slightly higher, though.
Reply from Rafael Duarte: The client agreed to pay for the extra words at the standard rate, so the margin covers Petra. Please go ahead.
Reply from Ingrid Holm: Done, Petra starts tomorrow. I'll update the shared glossary first so that we stay consistent, and I'll send the client the new delivery date of the 13th."""),
    ("email", """From: IT Security. To: all employees. Subject: Phishing emails pretending to be payroll.
This morning several colleagues received emails that claim to come from payroll and ask you to confirm your bank details through a link. These emails are fake. Do not click the link. If you entered any details, change your password immediately and call the service desk.
Reply from Harriet Doyle: I clicked the link but closed the page before typing anything. Do I still need to do something?
Reply from IT Security: Thanks for reporting it. Opening the page alone is low risk, but please run a scan with the antivirus tool from the start menu and tell us the result.
Reply from Ben Ashworth: Can we block the sender's domain?
Reply from IT Security: Already done as of 10:40, and the remaining copies have been removed from all mailboxes."""),
    ("ticket", """Ticket #48211, priority high. Customer: Fernhill Dental (three locations), reported by the office manager. Since this morning's update, the appointment-booking software fails to print daily schedules at two of the three locations: the print button shows a spinner and then nothing happens. The third location, which is still on the previous version because its computer was off overnight, prints fine. Restarting the computers and the printers did not help. The printers are the same model at all sites and print normally from other applications. The customer needs printed schedules at the front desk by 7:30 tomorrow. Agent notes: reproduced on a test machine with the new version and the same printer driver; the print preview renders, but the job never reaches the spooler. Escalated to engineering with logs attached. Workaround given: export the schedule to PDF and print it from the PDF viewer, which worked for the customer."""),
    ("ticket", """Ticket #10277. Subject: Cannot log in after changing phone. The user replaced her phone and no longer has the authenticator app that generates codes for her account. She still has access to her email but did not save backup codes when she set up two-factor authentication. She tried the lost-device link and received the verification email, but the link in it says it has expired, even when clicked within a minute. The agent found that the link expires after fifteen minutes, but the user's mail provider pre-scans links, which consumes the one-time token before she clicks. Following policy, the agent disabled two-factor authentication after verifying her identity on a video call with photo ID, and asked her to re-enrol with the new phone and save backup codes. A bug was filed about one-time links being consumed by link scanners."""),
    ("ticket", """Ticket #3391, washing machine model WX-700. The customer reports that the machine stops mid-cycle with error code E21 and water left in the drum. It happened three times this week, always during the rinse phase. The machine is fourteen months old, so the two-year warranty applies. Over the phone the agent walked the customer through cleaning the drain filter behind the small panel at the bottom front; the customer found a coin and some fluff, removed them, and ran an empty rinse cycle, which completed successfully. The agent explained that E21 means the machine could not drain within the expected time. The ticket stays open for a week. If the error returns, a technician visit will be booked to check the drain pump, at no cost to the customer."""),
    ("ticket", """Ticket #77590. Subject: Charged twice for annual plan. The customer upgraded from the monthly to the annual plan on the 2nd and sees two charges of 119 on their card statement. The agent checked the billing system: the first payment attempt returned a timeout from the payment provider, the app retried, and both attempts went through. Only one subscription exists on the account. The agent refunded the duplicate charge the same day and told the customer that it would appear on their statement within five to ten working days, depending on the bank. The customer asked for confirmation in writing, which was sent with the refund reference. Internal note: this is the fourth duplicate charge caused by timeouts this month; linked to the existing engineering issue about making payment retries idempotent."""),
    ("ticket", """Ticket #2046, internal IT. Requester: the finance team, 12 people. The shared drive folder 'Month-end close' became read-only for everyone in the team on Monday afternoon. Users can open files but not save changes, and Excel offers only 'Save As'. Nothing was changed intentionally. The technician found that a permissions clean-up script, run on Monday to remove access for former employees, also removed the modify right from the finance group, because that group had been nested inside a departed employee's personal group. Rights were restored at 9:15 on Tuesday and confirmed with two users. The clean-up script is paused until it is changed to skip nested groups. Finance lost about half a day on the month-end close; the controller has been informed and asked for a short incident summary for the audit file."""),
    ("ticket", """Ticket #66102. Subject: Smart thermostat shows offline. The customer's thermostat shows as offline in the app every evening between about 6 and 10 p.m., then reconnects by itself. Heating keeps working on the schedule stored on the device, but the customer cannot change the temperature remotely during those hours. The router is a mesh system with three nodes, and the thermostat is in the hallway, far from the main node. The agent suspected congestion on the 2.4 GHz band in the evenings, when the family streams video, and asked the customer to enable the separate 2.4 GHz network that the mesh system offers for smart-home devices. After the thermostat was moved to that network, it stayed online for three evenings in a row. Ticket closed as resolved; the agent added the steps to the knowledge-base article on mesh routers."""),
    ("abstract", """We study how learning-rate warm-up affects the stability of training small transformer language models. Across 240 training runs with models of 20 to 350 million parameters, we vary the warm-up length between 0 and 5 percent of training steps and record loss spikes, defined as increases of more than 10 percent over a moving average. Without warm-up, 38 percent of runs have at least one spike, compared with 6 percent with a warm-up of 1 percent of the steps; longer warm-up gives no further benefit and slightly slows convergence. Spikes are concentrated in the first 2,000 steps and correlate with the norm of the updates to the embedding layer. Clipping only the embedding gradients removes most spikes even without warm-up. We release our training configurations and logs."""),
    ("abstract", """Urban green roofs are often promoted as habitat for pollinators, but few studies have measured their use over full seasons. We surveyed bees and hoverflies on 18 green roofs and 18 nearby ground-level gardens in one city from April to September, using pan traps and timed transect walks. Roofs held on average 40 percent fewer insects and 30 percent fewer species than gardens. Species richness on roofs increased with plant diversity and decreased with building height; roofs above about 20 metres hosted almost only larger, strong-flying species. Roofs planted mainly with sedum had the lowest counts. Our results suggest that green roofs can support pollinators if they are low and planted with diverse flowering species, but they should not be treated as equivalent to ground-level habitat."""),
    ("abstract", """Background: Reminder text messages are widely used to reduce missed outpatient appointments, but the best timing is unclear. Methods: In a randomized trial at three hospital clinics, 4,812 adults with scheduled appointments were assigned to receive a single reminder seven days, three days, or one day before the appointment, or no reminder. The primary outcome was non-attendance without prior cancellation. Results: Non-attendance was 11.9 percent without a reminder, 9.8 percent with a seven-day reminder, 8.1 percent with a three-day reminder, and 8.4 percent with a one-day reminder. Three-day reminders also led to more cancellations made early enough for the slot to be reused. Conclusions: A single reminder three days before an appointment reduced missed appointments by about a third and freed more slots than a reminder sent the day before."""),
    ("abstract", """Lithium-metal anodes promise a higher energy density than graphite but suffer from dendrite growth during repeated charging. We report a thin coating made of a polymer blended with ceramic nanoparticles, applied by a simple dip process, that suppresses dendrites in coin cells. Coated anodes cycled for 600 hours at 1 mA per square centimetre without short circuits, whereas uncoated controls failed after 140 hours on average. Microscopy after cycling showed smooth, dense lithium deposits under the coating. The coating adds about 2 micrometres of thickness and reduces initial capacity by 3 percent. In pouch cells with a nickel-rich cathode, capacity retention after 200 cycles improved from 71 to 86 percent. The process uses only room-temperature steps, which could make it easy to scale up."""),
    ("abstract", """This study examines whether short daily retrieval practice improves the long-term retention of vocabulary in secondary-school language classes. Twelve classes (312 students) were randomly assigned to begin each lesson with either a five-minute low-stakes quiz on earlier material or five minutes of re-reading the same material. After one term, both groups performed similarly on an immediate test, but on a surprise test eight weeks later the quiz group recalled 18 percent more words. The benefit was larger for students who scored below the median at baseline. Teachers reported that the quizzes were easy to run but that students initially disliked being tested. We discuss the implications for lesson planning and the limitations of measuring vocabulary alone."""),
    ("abstract", """We present a pipeline for detecting transient events in images from a wide-field survey telescope that processes a night of data, about 30 terabytes, in under four hours on a 64-node cluster. The pipeline subtracts a reference image from each new exposure, finds candidate sources, and ranks them with a convolutional classifier trained on 1.2 million labelled examples, most of which are artefacts from bad pixels, satellites, and imperfect subtraction. On a held-out month of data, the classifier keeps 97 percent of real transients while rejecting 99.6 percent of artefacts, reducing the number of candidates that astronomers must inspect from about 50,000 to 1,800 per night. We describe failure cases near bright stars and the steps taken to retrain the classifier as the camera ages."""),
    ("changelog", """Quillnote desktop 3.2.0. New: notes can be pinned to the top of any folder, and pinned notes sync across devices. New: export a notebook to a single Markdown file, with images in a subfolder. Changed: search now matches words inside attachments, including PDFs, so the first indexing after the update can take several minutes on large libraries. Changed: the default font size is 15 instead of 14. Fixed: the app no longer freezes when pasting a table with more than 500 rows. Fixed: reminders set in a different time zone now fire at the right local time. Fixed: dark-mode colours in code blocks. Removed: the legacy Evernote importer, replaced by the general ENEX import added in 3.0. Known issue: on Linux the tray icon may not appear in some desktop environments."""),
    ("changelog", """tidyjson 0.9.0. Breaking: load() now raises DuplicateKeyError by default when an object contains the same key twice; pass allow_duplicates=True to keep the old last-one-wins behaviour. Breaking: the minimum supported Python version is now 3.9. Added: a streaming reader, iter_load(), that yields the items of a top-level array without loading the whole file. Added: type hints for all public functions. Improved: dumping large lists of floats is about 2.5 times faster thanks to a new number formatter. Fixed: sort_keys no longer fails on nested dictionaries whose keys mix strings and numbers. Fixed: a memory leak when parsing deeply nested arrays. Docs: a new migration guide from 0.8 and examples for the streaming reader."""),
    ("changelog", """Patch 1.14 notes. Balance: the archer's charged shot now deals 15 percent less damage at long range but recharges one second faster. The knight's shield-bash stun is shortened from 1.5 to 1 second, in player-versus-player modes only. Maps: the Sunken Port map has a new route along the east docks, and spawn points have been moved to reduce spawn camping. Matchmaking: players who leave three ranked matches in one day are blocked from ranked play for 30 minutes. Fixes: a crash when opening the inventory during a loading screen; characters no longer get stuck on the stairs in the Monastery; the victory music no longer plays twice. Performance: loading times are about 20 percent shorter on consoles thanks to compressed texture streaming."""),
    ("changelog", """Router firmware 5.1.8 release notes. Security: fixes a vulnerability that let devices on the guest network reach the admin page; all users should update. Security: the admin session now times out after 15 minutes of inactivity instead of 60. New: scheduled Wi-Fi off times per network, for example turning the children's network off at night. New: the status page shows the signal strength of each connected device. Changed: automatic updates are now enabled by default on new installations; existing settings are kept. Fixed: the 5 GHz band sometimes dropped to a narrow channel width after a reboot, reducing speed. Fixed: port-forwarding rules with port ranges were not saved correctly. The update takes about four minutes, during which the internet connection is unavailable. Do not unplug the router while it updates."""),
    ("changelog", """Payments API changes for April. The /v2/refunds endpoint now accepts a partial amount; omitting the amount still refunds the full charge. Webhook events now include an api_version field so that receivers can detect format changes. The created_at field on all objects is now returned in UTC with a trailing Z; previously some endpoints omitted the time zone. Deprecation: the /v1/charges endpoint will stop accepting requests on 30 September; use /v2/payments instead, which supports the same parameters plus idempotency keys. Rate limits for test-mode keys are raised from 25 to 100 requests per second. Fixed: listing endpoints returned duplicate items when new objects were created during pagination; cursors now point at a fixed snapshot."""),
    ("incident", """Incident summary: checkout errors on 14 May. Between 13:05 and 13:52 UTC, about 18 percent of checkout attempts on the web store failed with an error page. The cause was a configuration change to the connection pool of the orders database, deployed at 13:02, which lowered the maximum number of connections from 200 to 20 because of a typo. Under lunchtime traffic the pool was exhausted and requests timed out. Monitoring alerted at 13:11, but the on-call engineer first investigated the payment provider, which had a notice on its status page at the time, and only found the change at 13:45. Rolling back fixed the errors within seven minutes. Follow-ups: validate pool settings against sensible bounds in CI, show recent configuration changes on the alert page, and require a second reviewer for database configuration."""),
    ("incident", """Post-incident review: delayed nightly reports. On Tuesday the nightly sales reports, normally ready by 6 a.m., arrived at 11:20. The reporting job waits for the data warehouse load to finish, and the load took five hours longer than usual because a new data source added on Monday contained 40 million duplicated rows from a faulty export. No data was lost, and the reports were correct once produced, but regional managers started the day without figures, and two of them placed stock orders based on the previous day's numbers. Actions: the load will reject any source whose row count changes by more than 50 percent from the previous day unless someone approves it; the reporting job will send a notice if it has not started by 5 a.m.; and new data sources will run in staging for a week before going live."""),
    ("notice", """Update to the remote work policy, effective 1 September. Employees may work remotely up to three days a week, as agreed with their manager and recorded in the HR system. Teams must choose at least one common office day per week so that colleagues meet in person. Working from another country is allowed for up to 20 working days a year but needs HR approval at least two weeks in advance because of tax and insurance rules. The company will reimburse up to 300, once, for home office equipment such as a chair or a monitor, against receipts. Employees are responsible for a safe and quiet working environment and must follow the data protection rules, including locking their screen and not printing confidential documents at home. Managers may ask an employee to come to the office for specific meetings with 48 hours' notice."""),
    ("notice", """Notice to the residents of Oakfield Court. The building's water supply will be shut off on Wednesday from 9 a.m. to about 3 p.m. while the contractor replaces the main riser pipe. Please store some water for drinking and flushing before 9 a.m. When the water comes back, the taps may run brown for a few minutes; let them run until the water is clear. Lift number 2 will also be out of service from Monday to Friday that week, because the contractor needs the shaft to bring materials up; lift 1 remains available. Residents with mobility needs who would like help with shopping that week can contact the caretaker. The work is part of the renovation programme agreed at the last residents' meeting and is paid for from the maintenance reserve, so there is no extra charge."""),
    ("blog", """Our second day in the Velden valley started with fog so thick that we could not see the lake from the guesthouse. By ten it had burned off, and we took the little ferry across to the village on the north shore, which has no road access and only about 200 inhabitants. We walked the path up to the chapel, an hour of steady climbing with views over the whole valley, and ate lunch at the only restaurant, where the owner catches the fish himself every morning. In the afternoon we rented bicycles and rode along the shore back towards town, stopping to swim at a small beach, although the water was cold even in August. The last ferry leaves at six, and we nearly missed it. Tips: bring cash, because the village restaurant does not take cards, and book the bicycles a day ahead in summer."""),
    ("blog", """The first public lending libraries in many towns began as subscription reading rooms, where members paid an annual fee to use a shared collection of newspapers and books. As literacy spread in the nineteenth century, reformers argued that access to books should not depend on the ability to pay, and towns began to fund libraries from local taxes. Early public libraries often kept their books behind counters, so readers had to choose titles from a catalogue and wait for a librarian to fetch them. Open shelves, where visitors could browse freely, became common only around the start of the twentieth century, and were at first criticized by people who feared theft and disorder. Children's rooms, story hours, and mobile libraries followed, turning libraries into community spaces rather than just collections of books."""),
]

SUMMARY_INSTRUCTIONS = {
    "meeting": ["Summarize these meeting notes. List the decisions and the action items with their owners.",
                "Write a short summary of this meeting for a colleague who missed it.",
                "Summarize the key points of these notes in three bullet points."],
    "news": ["Summarize this news report in two sentences.",
             "Give a one-paragraph summary of the following article.",
             "What are the main facts in this report? Summarize them briefly."],
    "review": ["Summarize this review: the main pros, the main cons, and the verdict.",
               "Summarize the customer review below in two or three sentences."],
    "email": ["Summarize this email thread: what was decided, and what happens next?",
              "Give me a short summary of this thread so I can catch up."],
    "ticket": ["Summarize this support ticket for the handover to the next shift.",
               "Write a short summary of the ticket: the problem, the cause, and the resolution."],
    "abstract": ["Summarize this abstract in plain language for a general reader.",
                 "Give a two-sentence summary of the findings in this abstract."],
    "changelog": ["Summarize these release notes for users in a few bullet points.",
                  "What are the most important changes in this release? Summarize briefly."],
    "incident": ["Summarize this incident report for management: impact, cause, and follow-ups.",
                 "Write a three-sentence summary of this incident."],
    "notice": ["Summarize this notice in a few sentences.",
               "What do I need to know from this notice? Give a short summary."],
    "blog": ["Summarize this text in one short paragraph.",
             "Write a brief summary of the following passage."],
}

SUMMARY_SYSTEMS = [
    "You are a helpful assistant that writes concise, accurate summaries.",
    "You summarize documents for busy readers. Be brief and do not add information that is not in the text.",
    "You are an assistant built into a company's internal tools. Summarize the text the user provides.",
]


def summarization_requests(rng: np.random.Generator) -> list[dict]:
    requests = []
    for kind, passage in PASSAGES:
        words = len(passage.split())
        assert 80 <= words <= 250, (words, passage[:60])
        instructions = SUMMARY_INSTRUCTIONS[kind]
        instruction = instructions[int(rng.integers(len(instructions)))]
        system = SUMMARY_SYSTEMS[int(rng.integers(len(SUMMARY_SYSTEMS)))]
        if rng.random() < 0.5:
            user = f"{instruction}\n\n{passage}"
        else:
            user = f"{instruction}\n\nText:\n\"\"\"\n{passage}\n\"\"\""
        # A summary is a fraction of the passage: 30-75% of its words, within 40-120 tokens.
        out = int(np.clip(round(words * rng.uniform(0.3, 0.75)), 40, 120))
        requests.append({"messages": [{"role": "system", "content": system},
                                      {"role": "user", "content": user}], "output_tokens": out})
    return requests


# --------------------------------------------------------------------------------------------
# Math: (category, question). Output lengths depend on the category (a proof is longer than a
# sum). 32 hand-written questions and 16 from templates with seeded numbers.
# --------------------------------------------------------------------------------------------

MATH_OUTPUT_RANGE = {
    "arithmetic": (60, 110), "units": (70, 130), "word": (100, 180), "algebra": (80, 150),
    "probability": (90, 170), "proof": (130, 200), "geometry": (90, 160), "statistics": (90, 150),
    "number theory": (80, 150), "calculus": (90, 160), "sequences": (80, 140),
}

MATH_QUESTIONS: list[tuple[str, str]] = [
    ("word", "A bakery sells muffins at 2.40 each or in boxes of six for 12.00. Jana needs exactly 20 muffins. What is the cheapest way to buy them, and how much does it cost?"),
    ("word", "A train leaves station A at 9:15 travelling at 80 km/h towards station B, which is 300 km away. A second train leaves B at 10:00 travelling towards A at 100 km/h. At what time do they meet, and how far from A?"),
    ("algebra", "Solve the system of equations 3x + 2y = 16 and x - y = 2."),
    ("algebra", "Find all real solutions of x^2 - 5x + 6 = 0 and check each one."),
    ("algebra", "Solve for x: 2(x - 3) + 5 = 3x - 7."),
    ("probability", "Two fair six-sided dice are rolled. What is the probability that the sum is 8?"),
    ("probability", "A bag contains 5 red and 3 blue marbles. Two marbles are drawn without replacement. What is the probability that both are blue? What is the probability that they have different colours?"),
    ("probability", "A test for a condition has 95% sensitivity and 90% specificity, and 2% of the population has the condition. If a randomly chosen person tests positive, what is the probability that they have the condition?"),
    ("units", "Convert 65 miles per hour to metres per second, showing each step. Use 1 mile = 1609.344 m."),
    ("units", "A recipe needs 350 grams of flour. If one cup of flour weighs about 125 grams, how many cups is that? Round to the nearest quarter cup."),
    ("units", "A room measures 4.2 m by 3.5 m. What is its floor area in square feet? Use 1 m = 3.2808 ft."),
    ("proof", "Prove that the sum of two odd integers is always even."),
    ("proof", "Prove that the square root of 2 is irrational."),
    ("proof", "Prove by induction that 1 + 2 + ... + n = n(n + 1)/2 for every positive integer n."),
    ("proof", "Prove that the product of any three consecutive integers is divisible by 6."),
    ("geometry", "A right triangle has legs of length 9 and 12. Find the length of the hypotenuse, the area, and the radius of the inscribed circle."),
    ("geometry", "A circular garden has a diameter of 10 m. A path 1 m wide is built around it. What is the area of the path?"),
    ("sequences", "The first term of an arithmetic sequence is 7 and the tenth term is 43. Find the common difference and the sum of the first 20 terms."),
    ("number theory", "Find the greatest common divisor of 462 and 1071 using the Euclidean algorithm."),
    ("number theory", "What is the remainder when 7^100 is divided by 5?"),
    ("word", "Three friends share a taxi along one route. Anna gets out after 4 km, Ben after 7 km and Chloe after 10 km. The fare is 30 in total. How should they split it fairly if each kilometre's cost is shared equally by the people in the taxi at the time?"),
    ("word", "A tank holds 1,200 litres. One pipe fills it in 6 hours and a drain empties it in 10 hours. If both are open and the tank starts empty, how long does it take to fill?"),
    ("word", "A jacket costs 80. It is discounted by 25%, and a further 10% is taken off the reduced price at the till. What is the final price, and what single percentage discount would give the same price?"),
    ("word", "You deposit 2,000 in an account that pays 3% interest per year, compounded monthly. How much is in the account after 5 years? How does that compare with simple interest at the same rate?"),
    ("statistics", "The test scores of a class are 72, 85, 90, 66, 85, 78, 94, 85 and 70. Find the mean, the median and the mode, and say which best describes a typical score."),
    ("calculus", "Find the derivative of f(x) = x^3 - 4x^2 + 2x - 7 and the x-values where the tangent line is horizontal."),
    ("probability", "In how many ways can a committee of 3 be chosen from 10 people if two particular people refuse to serve together?"),
    ("algebra", "The sum of a father's and his son's ages is 56. In four years the father will be three times as old as the son. How old are they now?"),
    ("algebra", "Solve 3^(2x - 1) = 81 and explain each step."),
    ("geometry", "A 5 m ladder leans against a wall with its foot 1.4 m from the wall. How high up the wall does it reach? If the foot slides 1.6 m further from the wall, how far does the top slide down?"),
    ("word", "Working alone, Maya can paint a fence in 5 hours and Leo can paint it in 7 hours. They work together for 2 hours, then Leo leaves. How much longer does Maya need to finish the fence?"),
    ("probability", "A fair coin is flipped 10 times. What is the probability of getting exactly 6 heads? What is the probability of getting at least 9 heads?"),
]

MATH_SYSTEMS = [
    "You are a patient math tutor. Show your working step by step, then state the final answer.",
    "Solve the problem. Explain each step briefly and give the final answer on its own line.",
]


def templated_math(rng: np.random.Generator) -> list[tuple[str, str]]:
    """16 questions from four templates, with seeded numbers."""
    items: list[tuple[str, str]] = []
    for _ in range(4):
        a, b = (int(v) for v in rng.integers(12, 99, size=2))
        d = int(rng.integers(3, 13))
        c = d * int(rng.integers(4, 30))
        items.append(("arithmetic", f"Compute {a} * {b} - {c} / {d} step by step, respecting the order of operations."))
    for _ in range(4):
        litres = int(rng.integers(45, 95)) / 10
        km = int(rng.integers(12, 90)) * 10
        price = int(rng.integers(150, 210)) / 100
        items.append(("units", f"A car uses {litres:.1f} litres of fuel per 100 km. How much fuel does it need for a {km} km round trip, and what does the fuel cost at {price:.2f} per litre?"))
    for _ in range(4):
        p0 = int(rng.integers(8, 60)) * 1000 + int(rng.integers(0, 1000))
        p1 = round(p0 * (1 + rng.uniform(-0.15, 0.45)))
        start, years = int(rng.integers(2000, 2012)), int(rng.integers(5, 13))
        items.append(("word", f"A town had {p0:,} residents in {start} and {p1:,} in {start + years}. What was the percentage change over the whole period, and what constant yearly growth rate would give the same result?"))
    for _ in range(4):
        x = int(rng.integers(-9, 13))
        a = int(rng.integers(2, 10))
        c = int(rng.integers(2, 10))
        while c == a:
            c = int(rng.integers(2, 10))
        b = int(rng.integers(1, 30))
        d = (a - c) * x + b  # a*x + b = c*x + d
        right = f"{c}x" if d == 0 else f"{c}x {'+' if d > 0 else '-'} {abs(d)}"
        items.append(("algebra", f"Solve for x: {a}x + {b} = {right}. Check your answer by substituting it back."))
    return items


def math_requests(rng: np.random.Generator) -> list[dict]:
    items = MATH_QUESTIONS + templated_math(rng)
    order = rng.permutation(len(items))
    requests = []
    for position, index in enumerate(order):
        category, question = items[int(index)]
        low, high = MATH_OUTPUT_RANGE[category]
        out = int(rng.integers(low, high + 1))
        if position % 4 == 3:  # every fourth request uses the completions API
            requests.append({"prompt": f"Question: {question}\nAnswer: Let's work through it step by step.\n",
                             "output_tokens": out})
        else:
            system = MATH_SYSTEMS[int(rng.integers(len(MATH_SYSTEMS)))]
            requests.append({"messages": [{"role": "system", "content": system},
                                          {"role": "user", "content": question}], "output_tokens": out})
    return requests


# --------------------------------------------------------------------------------------------
# RAG: 16 fictional knowledge bases of 4 documents, 3 questions each. A question lists the
# documents that answer it; the request adds distractors from the same base (2-4 documents in
# all, shuffled) so that the prompt is 200-400 words.
# --------------------------------------------------------------------------------------------

RAG_BASES: list[dict] = [
    {"org": "Corvid Analytics HR", "docs": [
        ("Annual leave and carry-over", "Full-time employees receive 26 days of annual leave per calendar year, plus public holidays. Part-time employees receive a pro-rata amount based on their contracted hours. Up to 5 unused days may be carried over into the next year; they must be taken by 31 March, after which they expire. Carrying over more than 5 days is only possible when a manager cancelled approved leave for business reasons, and HR must confirm it in writing. Leave requests for periods longer than three days should be submitted in the HR portal at least two weeks in advance. Managers respond within five working days."),
        ("Business travel expenses", "Employees travelling for work book flights and hotels through the company travel portal. Economy class is the standard for all flights; premium economy is allowed for flights longer than six hours, and business class requires approval from a director. The daily meal allowance is 45 within the country and 60 abroad, paid without receipts; alcohol is never reimbursed. Taxis are reimbursed when public transport is not practical, for example late at night or with heavy equipment. Submit expense claims within 30 days of returning, with receipts for hotels, transport, and any item above 25."),
        ("Sick leave", "If you are ill, tell your manager before your usual start time on the first day, by phone or message, and record the absence in the HR portal when you are back. No medical certificate is needed for absences of up to three consecutive working days. From the fourth working day, a doctor's note is required and should be uploaded to the HR portal within a week. Sick days during approved annual leave can be converted back into leave days if you provide a doctor's note. Employees receive full pay for up to 20 sick days per year; longer absences are handled case by case with HR."),
        ("Parental leave", "Corvid Analytics offers 16 weeks of fully paid leave to the primary caregiver and 6 weeks of fully paid leave to the other parent, including for adoption. Leave can be taken in up to three blocks within the first year after the birth or adoption. Tell HR at least eight weeks before the planned start. Employees returning from parental leave may work reduced hours, down to 60 percent, for up to six months while keeping their full-time position. Keeping-in-touch days during the leave are optional and paid at the normal daily rate."),
    ], "questions": [
        ("I have 8 days of leave left this year. How many can I take into next year, and until when can I use them?", [0]),
        ("I'm flying to Singapore for a client workshop; the flight is 12 hours. Which class can I book, and how much do I get per day for meals?", [1]),
        ("I was off sick for four days last week. Do I need a doctor's note, and where do I send it?", [2]),
    ]},
    {"org": "Aeris, maker of the P3 air purifier", "docs": [
        ("Replacing the filter", "The Aeris P3 uses a combined HEPA and carbon filter. Under normal use, replace it every 6 to 8 months; in homes with smokers or pets, or during wildfire season, it may need replacing every 4 months. To replace it, switch off and unplug the purifier, turn it upside down, twist the base cover anticlockwise, and lift the old filter out by its tab. Remove the plastic wrapping from the new filter before inserting it. After replacement, hold the filter button for 5 seconds until the ring light flashes white twice; this resets the filter timer. Do not wash the filter, because water damages the HEPA layer."),
        ("Indicator lights", "The ring light on top shows the air quality: blue means good, yellow moderate, and red poor. A steady red light for more than an hour usually means a nearby source of pollution, such as cooking. A blinking red light means that the filter timer has expired and the filter should be replaced. A blinking yellow light means that the sensor needs cleaning: wipe the sensor window on the side with a dry cotton swab. If the light is off but the fan runs, the display has been switched off with the light button; press it once to turn the display on again."),
        ("Night mode and noise", "Night mode lowers the fan to its slowest speed, dims the ring light, and turns off the button lights. Press the moon button to turn it on. In night mode the purifier runs at about 24 dB, roughly as quiet as a whisper, and cleans the air of a 20 square metre room about once per hour. Automatic mode may raise the fan speed at night if the air quality drops; night mode keeps the fan at the lowest speed regardless. In bedrooms, place the purifier at least 1 metre from the bed and away from curtains, which can block the air intake."),
        ("Warranty", "The Aeris P3 has a two-year warranty from the date of purchase, covering defects in materials and workmanship. Filters are consumables and are not covered, except when a new filter is faulty on arrival. The warranty does not cover damage caused by water, by dropping the device, or by filters from other manufacturers. To make a claim, contact support with the serial number, found on the label under the base, and your proof of purchase. Registering the product on our website within 30 days of purchase extends the warranty by one year."),
    ], "questions": [
        ("The light on top of my purifier keeps blinking red. What does it mean, and what do I need to do?", [1, 0]),
        ("Is a replacement filter covered by the warranty, and how can I get a longer warranty?", [3]),
        ("Can I make the purifier quieter in the bedroom at night, and how loud is it then?", [2]),
    ]},
    {"org": "the Hollis & Barr IT service desk", "docs": [
        ("Connecting to the VPN", "You need the VPN to reach internal systems such as the document archive and the time-recording tool from outside the office. Install the GlobalLink client from the self-service portal; it is already installed on company laptops issued after 2022. Sign in with your usual account and approve the request in the authenticator app. The VPN is not needed for email, the intranet, or video calls, which work over the internet. If the client shows a certificate error, your laptop has not been connected to the office network for more than 90 days; bring it to the office or ask the service desk to renew the certificate remotely."),
        ("Password rules", "Passwords must be at least 14 characters long; we recommend a passphrase of four or more unrelated words. Passwords do not expire on a schedule. You only need to change yours if you suspect that it has been exposed, or if the service desk asks you to after a security incident. You cannot reuse any of your last 10 passwords. After 8 failed sign-in attempts your account is locked for 30 minutes. Never share your password, not even with the service desk, which will never ask for it. Use the company password manager for any other credentials you need for work."),
        ("Laptop replacement", "Company laptops are replaced every four years. About two months before your replacement date you will receive an email from IT with a booking link for the swap appointment, which takes about an hour. Earlier replacement is possible if the laptop is damaged or cannot run the software your role needs; your manager must approve the request in the service portal. Slowness alone is not a reason for early replacement: first ask the service desk for a health check, which often solves the problem by freeing disk space or replacing the battery."),
        ("Printing", "All office printers use secure release: send your document to the FollowMe queue and release it at any printer by tapping your badge. Jobs that are not released are deleted after 24 hours. Printing from home to office printers is not supported, even over the VPN. Colour printing is disabled by default; ask the service desk to enable it if your role requires it. For large jobs of more than 500 pages, such as court bundles, use the print room on the ground floor, which also offers binding."),
    ], "questions": [
        ("How long does my password have to be, and how often do I need to change it?", [1]),
        ("My laptop is three years old and very slow. Can I get a new one?", [2]),
        ("Can I print to the office printer from home if I'm connected to the VPN?", [3, 0]),
    ]},
    {"org": "Tallybook billing support", "docs": [
        ("Plans", "Tallybook has three plans. Starter costs 9 per month for one user and up to 50 invoices per month. Team costs 29 per month for up to five users and adds unlimited invoices, recurring invoices, and bank feeds. Business costs 79 per month for up to 20 users and adds multi-currency accounting, approval workflows, and priority support. Annual billing gives two months free on every plan. Extra users on Team and Business cost 6 per user per month. All prices exclude VAT."),
        ("Changing plans", "You can upgrade at any time from Settings > Billing. Upgrades take effect immediately, and you pay the difference for the rest of the current billing period. Downgrades take effect at the end of the current billing period; no partial refund is made for the remaining time, and you keep the features of your current plan until then. If your usage exceeds the limits of the lower plan, for example more users than it allows, you must remove users before the downgrade can be scheduled."),
        ("Refunds", "Monthly subscriptions are not refundable. Annual subscriptions are refunded in full if you cancel within 14 days of the payment date. After 14 days annual subscriptions are not refunded, but you can turn off renewal at any time so that the plan ends at the end of the paid year. Duplicate charges and billing errors are always refunded, whenever they are reported; contact billing support with the invoice number."),
        ("Invoices and VAT", "Invoices for your subscription are emailed to the account owner and can be downloaded as PDF from Settings > Billing > Invoice history. To show your company's VAT number on invoices, enter it under Settings > Billing > Company details; it is validated automatically. A valid EU VAT number from outside Ireland switches the invoice to reverse charge, so no VAT is added. Changes apply to future invoices only; to have a past invoice reissued with the VAT number, contact billing support within 90 days of the invoice date."),
    ], "questions": [
        ("If I downgrade from Team to Starter halfway through the month, do I get money back for the rest of the month?", [1]),
        ("We paid for an annual Business plan 20 days ago and now want to cancel. Can we get a refund?", [2]),
        ("How do I get our VAT number onto last month's invoice?", [3]),
    ]},
    {"org": "Meridian Logistics, Dock 4 warehouse", "docs": [
        ("Forklift operation", "Only staff with a valid internal forklift licence may drive forklifts; the licence is renewed every three years after a practical test. Before each shift, the driver completes the pre-use checklist on the tablet attached to the truck, covering brakes, horn, forks, chains, and battery level. A truck that fails any item must be tagged out of service and reported to the shift supervisor. The speed limit inside the warehouse is 8 km/h, and 5 km/h in marked pedestrian zones. Never carry passengers, and never raise a load while the truck is moving."),
        ("Personal protective equipment", "Safety shoes and high-visibility vests are required for everyone on the warehouse floor, including visitors, who can borrow both at reception. Cut-resistant gloves are required when opening cartons with knives or handling metal strapping. Hearing protection is required in the compactor area, which is marked with blue signs. Hard hats are required only in the high-bay racking aisles during restocking, when a red beacon flashes at the aisle entrance. Damaged equipment is replaced free of charge at the stores counter."),
        ("Reporting incidents and near misses", "Report every injury, however minor, to your supervisor before the end of your shift, and record it in the safety app within 24 hours. Near misses, such as a falling box that hits no one, must also be recorded, because they help us fix hazards before someone is hurt. First-aid kits are at each dock door and in the canteen, and trained first-aiders wear a green badge. For serious injuries, call the emergency number on the yellow signs first, then your supervisor. Reports can be made anonymously through the app."),
        ("Storing chemicals", "Cleaning chemicals and battery acid are stored in the locked cabinet next to the charging area. Keep acids and alkalis on separate shelves, and never store anything above eye level. Each product has a safety data sheet in the red folder on the cabinet door. Battery acid spills are neutralised with the spill kit beside the chargers; wear the face shield and rubber gloves from the kit. Empty containers go back to the cabinet for collection, never into general waste."),
    ], "questions": [
        ("A visitor is coming onto the warehouse floor tomorrow. What safety gear do they need, and where can they get it?", [1]),
        ("A box fell off a shelf near me today but didn't hit anyone. Do I need to report it, and how?", [2]),
        ("The horn on our forklift failed the pre-use check. What should I do?", [0]),
    ]},
    {"org": "Northgate University finance office", "docs": [
        ("Booking travel", "Staff and doctoral students book university travel through the contracted agency, TravelDesk, by phone or online. Bookings made elsewhere are reimbursed only if they were at least 10 percent cheaper than the agency's offer for the same trip, shown by a screenshot taken at the time of booking. Rail is required for trips under five hours when a direct or one-change connection exists. Flights must be economy class. Conference registration fees can be paid directly by the department with the university credit card."),
        ("Daily allowances", "For trips lasting more than eight hours, staff receive a daily allowance for meals: 28 for trips within the country, and country-specific rates abroad, listed on the finance intranet. If a meal is provided, for example a conference lunch or a hotel breakfast, the allowance is reduced by 20 percent for breakfast and by 40 percent each for lunch and dinner. Claims must be submitted within three months of the end of the trip."),
        ("Using a private car", "Using a private car for university travel must be approved in advance by the head of department. Mileage is reimbursed at 0.30 per kilometre, plus 0.05 per kilometre for each colleague travelling in the same car. Parking fees and tolls are reimbursed against receipts. The university's insurance does not cover damage to private cars; drivers rely on their own insurance, and a lost no-claims bonus is not compensated."),
        ("Travel insurance", "All staff on approved university trips are covered by the university's travel insurance, including medical expenses, repatriation, and lost luggage up to 2,000. There is no need to buy separate insurance. Private holidays added to a work trip are not covered for the private days. Before travelling abroad, download the insurance card from the finance intranet and keep the emergency assistance number with you."),
    ], "questions": [
        ("I'm driving to a conference with two colleagues, 240 km each way. How much mileage can I claim in total?", [2]),
        ("The conference provides lunch every day. How does that change my daily allowance on a domestic trip?", [1]),
        ("I found a flight online that is 15 percent cheaper than TravelDesk's offer. Can I book it myself?", [0]),
    ]},
    {"org": "Ashcombe Public Libraries", "docs": [
        ("Membership", "Membership is free for anyone who lives, works, or studies in Ashcombe. Bring a photo ID and proof of address, such as a utility bill from the last three months. Children under 16 can join with the signature of a parent or guardian. Members can borrow from all seven branches and use the e-book and audiobook service with their card number and PIN. Visitors who do not qualify can buy a temporary card for 15 per year."),
        ("Loans and renewals", "Adults can borrow up to 20 items at once. Books and audiobooks are lent for three weeks, DVDs and games for one week. Items can be renewed up to three times online, by phone, or at any branch, unless another member has reserved them. Reservations are free for books and cost 1 for DVDs. You will receive an email reminder two days before items are due back."),
        ("Late returns and lost items", "Since 2022 there are no late fees on children's items. Adult items returned late are charged 0.20 per day per item, up to a maximum of 6 per item. Borrowing is blocked when unpaid charges reach 10. If an item is lost or damaged, you pay the replacement cost shown in your account plus a processing fee of 2; if you find and return the item within six months, the replacement cost is refunded."),
        ("Room bookings", "Meeting rooms at the Central and Eastside branches can be booked by members for up to four hours at a time. Rooms are free for community groups and non-profit organisations and cost 12 per hour for commercial use. Book online at least two days in advance. Rooms have a projector and Wi-Fi. Food is not allowed, but drinks with lids are. Commercial bookings cancelled less than 24 hours in advance are charged in full."),
    ], "questions": [
        ("I returned two adult novels 40 days late. How much do I owe, and can I still borrow books?", [2]),
        ("Can I renew a DVD, and how long is it lent for?", [1]),
        ("Can our book club use a meeting room for free, and can we bring snacks?", [3]),
    ]},
    {"org": "Keystead, maker of the K2 smart lock", "docs": [
        ("Batteries", "The K2 runs on four AA alkaline batteries, which last about 10 months at 10 unlocks per day. Do not use rechargeable batteries: their lower voltage makes the low-battery warning unreliable. When the batteries are low, the lock beeps three times after each unlock and the app sends a notification; you then have about four weeks of normal use left. If the batteries run out completely, hold a 9-volt battery against the two contacts under the keypad to power the lock temporarily, and enter your code."),
        ("Guest codes", "Owners can create up to 50 guest codes in the app. Each code can be permanent, valid on a schedule (for example weekdays from 8 a.m. to 6 p.m. for a cleaner), or single-use. Codes are 4 to 8 digits long. Guest codes work even when the lock is offline, because they are stored on the lock, but creating or deleting codes requires the lock to be connected to the bridge. The history in the app shows which code opened the door and when."),
        ("Auto-lock", "Auto-lock locks the door again a set time after it is unlocked, from 10 seconds to 5 minutes; the default is 30 seconds. Enable it under Lock settings > Auto-lock. Auto-lock needs the door sensor, the small magnet supplied in the box, fitted to the door frame; without it, the lock cannot tell whether the door is closed and may throw the bolt while the door is open. Calibrate the sensor in the app after fitting it."),
        ("If the bolt jams", "If the lock makes a grinding sound and the bolt does not fully extend, the door is probably misaligned with the strike plate. Push or pull the door firmly closed and try again. If that helps, adjust the strike plate: loosen its screws, move it 1 to 2 mm towards the bolt, and tighten them again. Do not lubricate the lock with oil or grease, which attract dust; use a dry graphite spray if needed. If the bolt jams repeatedly even when the door is aligned, contact support, because the motor may be faulty."),
    ], "questions": [
        ("Can I give my cleaner a code that only works on weekdays during the day?", [1]),
        ("My lock has started beeping three times whenever I unlock it. What does that mean, and how long do I have?", [0]),
        ("I turned on auto-lock, but sometimes the bolt comes out while the door is still open. Why?", [2]),
    ]},
    {"org": "the Orbit platform engineering team", "docs": [
        ("Deploying to production", "Services are deployed to production through the release pipeline, never by hand. A merge to the main branch builds an image and deploys it to staging automatically. Promotion to production requires a green staging run and a click on Promote by someone other than the author. Deploys are frozen from Friday 3 p.m. to Monday 9 a.m. and during the annual freeze in late December; emergency fixes during a freeze need approval from the on-call lead. Every deploy is announced automatically in the #deploys channel."),
        ("Code review", "Every change needs one approving review. Changes to the payments, authentication, or database migration folders need two, one of them from the owning team listed in the CODEOWNERS file. Reviewers should respond within one working day. Keep pull requests under 400 changed lines where possible; larger changes should be split or discussed in advance. Authors resolve comments themselves, and reviewers do not push commits to someone else's branch without asking."),
        ("On-call", "Each team runs a weekly on-call rotation, handing over on Mondays at 10 a.m. The on-call engineer must acknowledge a page within 15 minutes, day or night, and should be able to reach a laptop within 30 minutes. On-call engineers receive a flat weekly allowance plus time off in lieu for any incident work between 10 p.m. and 7 a.m. If you cannot cover your shift, arrange a swap and update the schedule; the team lead is the last escalation point."),
        ("Feature flags", "New user-facing features should ship behind a feature flag so that they can be turned off without a deploy. Create flags in the flag service with an owner and an expiry date; flags older than 90 days trigger a reminder to the owner to remove them. Do not use flags for configuration that differs per customer; use the settings service instead. Turning a flag on for all users in production counts as a release and must be announced in #deploys."),
    ], "questions": [
        ("I need to ship a fix on Saturday morning. Am I allowed to deploy, and who has to approve it?", [0]),
        ("My change touches the database migrations folder. How many approvals do I need, and from whom?", [1]),
        ("I was paged at 2 a.m. and worked on the incident for two hours. Do I get anything for that?", [2]),
    ]},
    {"org": "Skyrill Air customer service", "docs": [
        ("Baggage allowance", "Economy Light fares include one personal item that fits under the seat (40 x 30 x 15 cm). Economy Standard adds one cabin bag of up to 8 kg and 55 x 40 x 23 cm. Economy Flex and Business include one checked bag of 23 kg; Business passengers may check two. Extra checked bags cost 35 each when added online and 60 at the airport. Bags over 23 kg and up to 32 kg are charged an overweight fee of 50; bags over 32 kg are not accepted."),
        ("Delays and cancellations", "If your flight arrives more than three hours late, or is cancelled less than 14 days before departure, you may be entitled to compensation of 250 to 600 depending on the distance, unless the cause was extraordinary, such as severe weather or an air traffic control strike. Claims are made on the Manage booking page. If you are delayed more than two hours at the airport, Skyrill provides meal vouchers; for overnight delays, the ground staff arrange a hotel and transport."),
        ("Travelling with pets", "Cats and small dogs weighing up to 8 kg including the carrier can travel in the cabin on flights under four hours, for a fee of 50 per flight. The carrier must fit under the seat in front. Larger dogs travel in the hold in an approved crate, which must be booked at least 48 hours in advance by calling customer service. Assistance dogs travel free in the cabin. Pets are not accepted on flights to the United Kingdom, except assistance dogs."),
        ("Seat selection", "Seats can be selected for a fee from the time of booking until check-in opens, 24 hours before departure. Standard seats cost 8 to 15, and extra-legroom seats cost 25 to 40. Flex and Business fares include free seat selection. Passengers who do not choose a seat are assigned one free of charge at check-in; Skyrill tries to seat children under 12 next to at least one adult on their booking at no cost."),
    ], "questions": [
        ("My flight arrived four hours late because of a technical problem with the plane. Can I get compensation, and how do I claim it?", [1]),
        ("I want to bring my 6 kg cat on a two-hour flight to Madrid. Is that allowed, and how much does it cost?", [2]),
        ("I'm on an Economy Standard fare. Can I take a 10 kg suitcase into the cabin?", [0]),
    ]},
    {"org": "Pulse Fitness", "docs": [
        ("Membership types", "Pulse offers three memberships. Off-Peak (24 per month) gives access on weekdays before 4 p.m. and all day at weekends. Standard (35 per month) gives unlimited access to your home club. Plus (49 per month) gives access to all 12 clubs and includes two guest passes per month. All memberships include group classes; Plus members can book classes 10 days ahead instead of 7. There is no joining fee when you sign up online, and the minimum term is one month."),
        ("Freezing and cancelling", "You can freeze your membership for 1 to 3 months per year for a fee of 5 per month, for example while travelling; medical freezes with a doctor's note are free. Freezes must be requested at least 7 days before the next payment date. To cancel, give one month's notice in the app or at reception; your access continues until the end of the notice period."),
        ("Guests", "Plus members receive two guest passes per month, which do not roll over. Other members can buy a day pass for a guest for 10. Guests must be at least 16, bring photo ID, and complete the health questionnaire at reception. A guest can visit at most four times per year before being asked to join."),
        ("Class bookings", "Book group classes in the app. If you cannot attend, cancel at least two hours before the start. Late cancellations and no-shows count as strikes; three strikes in 30 days block class bookings for seven days. Waiting lists move automatically, and you receive a notification if you get a place. Arrive five minutes early: the places of members who have not checked in two minutes before the start may be given to people on the waiting list."),
    ], "questions": [
        ("I'm going abroad for two months. Can I pause my membership, and what does it cost?", [1]),
        ("I'm a Standard member. Can I bring a friend to the gym, and what does it cost?", [2, 0]),
        ("I missed two classes this month without cancelling. What happens if I miss another one?", [3]),
    ]},
    {"org": "Vantory's privacy team", "docs": [
        ("Retention periods", "Vantory keeps customer account data for as long as the account is active. After an account is closed, its data is kept for 30 days so that it can be restored on request, and is then deleted from production systems. Invoices and payment records are kept for 7 years to comply with accounting law. Application logs containing IP addresses are kept for 90 days. Support conversations are kept for 2 years after the ticket is closed."),
        ("Deletion requests", "Users can ask for their personal data to be deleted by email to the privacy team or with the form in account settings. We confirm the request within 3 working days and complete it within 30 days. Data that we must keep by law, such as invoices, is excluded and kept only for the legal period. If the user belongs to a company workspace, we inform the workspace administrator, who owns the workspace content."),
        ("Access requests", "Users can request a copy of their personal data. We provide it in machine-readable formats, JSON and CSV, within 30 days, free of charge for the first request each year. To protect accounts, we verify the requester's identity by sending a confirmation link to the account's email address. Requests made on behalf of another person need written authorization from that person."),
        ("Backups", "Production databases are backed up every 6 hours; backups are encrypted and stored in a separate region. Backups are kept for 35 days and then overwritten, so deleted data disappears from backups at most 35 days after it is deleted from production. Backups are restored only to recover from incidents, never to bring back individual deleted records."),
    ], "questions": [
        ("A user asked us to delete their data. How long do we have, and is the data also removed from backups?", [1, 3]),
        ("How long do you keep application logs that contain IP addresses?", [0]),
        ("Can I get a copy of my data as an Excel file, and does it cost anything?", [2]),
    ]},
    {"org": "Brevo, maker of the Brevo 200 espresso machine", "docs": [
        ("Descaling", "Descale the Brevo 200 when the orange drop symbol lights up, about every two months with hard water. Use only Brevo descaling liquid: fill the tank with 0.5 litres of water and one sachet, place a container of at least 1 litre under the outlets, and hold the steam and 1-cup buttons together for 3 seconds. The cycle takes about 25 minutes and pauses halfway so that you can empty the container and refill the tank with clean water. Vinegar damages the seals and voids the warranty."),
        ("Grind settings", "The grinder has 12 settings, and 1 is the finest. Start with setting 5. If an espresso runs in less than 20 seconds and tastes sour, grind finer; if it takes longer than 35 seconds and tastes bitter, grind coarser. Change the setting only while the grinder is running, one step at a time, to avoid jamming it. Oily, dark-roasted beans can clog the grinder; if you use them, clean the burrs monthly with the supplied brush."),
        ("Error codes", "E1: water tank missing or empty; refill the tank and reseat it. E2: bean container empty or beans stuck; stir the beans. E3: brewing unit not inserted correctly; remove it and reinsert it until it clicks. E4: machine too hot; switch it off for 30 minutes. E7: internal fault; switch off, unplug for one minute, and restart. If E7 returns, contact service and do not open the machine."),
        ("Cleaning the milk frother", "Purge the steam wand for two seconds after every use, then wipe it with a damp cloth. Once a week, remove the wand tip and soak it in warm water with a drop of washing-up liquid for 10 minutes. If milk has dried inside the wand, clear the holes with the thin cleaning needle supplied in the box. The milk jug is dishwasher safe; the wand is not."),
    ], "questions": [
        ("My espresso comes out in 15 seconds and tastes sour. What should I change?", [1]),
        ("Can I descale the machine with vinegar instead of the Brevo liquid?", [0]),
        ("The display shows E7. What should I do?", [2]),
    ]},
    {"org": "Elmwood Family Practice", "docs": [
        ("Booking appointments", "Routine appointments can be booked online up to four weeks ahead, or by phone from 8 a.m. on weekdays. Same-day appointments for urgent problems are released at 8 a.m. and usually run out by 9, so call early. Each appointment lasts 10 minutes and covers one problem; book a double appointment if you have several issues. Video and phone appointments are available for many problems and can be chosen when booking."),
        ("Cancelling and missed appointments", "Please cancel at least 24 hours in advance, online, by phone, or by replying CANCEL to the reminder text. Missed appointments cost the practice about 30 minutes of clinician time every week. Patients who miss three appointments in 12 months without cancelling receive a letter, and after a fourth they may be asked to register with another practice."),
        ("Repeat prescriptions", "Order repeat prescriptions through your online account or the pharmacy app, not by phone. Allow three working days before collecting from your nominated pharmacy. A medication review is required once a year for repeat prescriptions; if yours is due, the prescription may be issued for one month only until you book a review. Controlled medicines need a new request each time."),
        ("Test results", "Blood test results normally arrive within five working days. A doctor reviews every result, and the practice will contact you if action is needed. You can see results in your online account once they have been reviewed, or call after 2 p.m., when the phone lines are less busy. Reception staff can tell you whether a result is normal but cannot interpret it in detail."),
    ], "questions": [
        ("I have two separate health problems I want to discuss. How should I book?", [0]),
        ("I ordered my repeat prescription online this morning. When can I collect it?", [2]),
        ("Can the receptionist explain what my cholesterol result means?", [3]),
    ]},
    {"org": "Brockley District Council waste services", "docs": [
        ("Collection schedule", "General waste (black bin) is collected every two weeks, alternating with recycling (blue bin), on the same weekday. Food waste (small green caddy) is collected every week. Put bins out by 7 a.m. on collection day with the lid closed; extra bags left beside the bin are not collected. Check your collection day by entering your postcode on the council website."),
        ("What goes in the blue bin", "The blue bin takes paper, cardboard, food tins, drinks cans, glass bottles and jars, and plastic bottles, pots, tubs and trays. Rinse containers and flatten cardboard. Plastic bags and film, polystyrene, nappies, and textiles must not go in the blue bin; take plastic bags and film to supermarket collection points. A bin containing the wrong items gets a tag and is not emptied until they are removed."),
        ("Bulky items", "Furniture, mattresses, and large appliances can be collected for 25 for up to three items, booked online. Fridges and freezers are collected separately for 20 each. Items must be left outside your property by 7 a.m. on the collection day. Alternatively, take them free of charge to the Holloway Lane recycling centre, open daily from 8 a.m. to 6 p.m.; vans and trailers need a booking."),
        ("Holiday changes", "In the weeks of Christmas and New Year, collections are one or two days later than usual; the revised dates are posted on the website in early December. Real Christmas trees are collected with garden waste in January, cut into pieces shorter than 1.5 metres. Other bank holidays do not change collection days."),
    ], "questions": [
        ("Can I put plastic carrier bags in the blue bin?", [1]),
        ("I need to get rid of an old sofa and a fridge. What will it cost to have them collected?", [2]),
        ("How do I sign up for garden waste collection, and what does it cost per year?", [3]),
    ]},
    {"org": "Ledgerline developer support", "docs": [
        ("Authentication", "All requests to the Ledgerline API use bearer tokens. Create an API key in the dashboard under Developers > Keys; keys start with ll_live_ for production and ll_test_ for the sandbox. Send the key in the Authorization header. Keys can be restricted to read-only access or to specific endpoints. A key that has not been used for 180 days is disabled automatically; it can be re-enabled in the dashboard within 30 days, after which it is deleted."),
        ("Rate limits", "Production keys may send 100 requests per second and sandbox keys 25. Requests over the limit receive HTTP 429 with a Retry-After header giving the number of seconds to wait. Bulk endpoints, such as the transaction import endpoint, count as 10 requests each. Limits apply per account, not per key, so creating more keys does not raise them. Contact support to discuss higher limits for large integrations."),
        ("Pagination", "List endpoints return at most 100 items per page, set with the limit parameter (default 25). The response includes a next_cursor field; pass it as the cursor parameter to get the next page. When next_cursor is null, there are no more items. Cursors expire after 24 hours. Items created after you fetch the first page may not appear in later pages of the same listing."),
        ("Webhooks", "Ledgerline sends webhook events as HTTPS POST requests to the URL you register. Each request carries a Ledgerline-Signature header, an HMAC-SHA256 of the body computed with your webhook secret; verify it before trusting the event. Respond with any 2xx status within 10 seconds. Failed deliveries are retried with exponential backoff for up to 3 days. Events can arrive out of order and more than once, so use the event id to ignore duplicates."),
    ], "questions": [
        ("We keep getting HTTP 429 errors. Will creating a second API key let us send more requests?", [1]),
        ("How do I fetch all transactions when there are more than 100?", [2]),
        ("Our webhook handler sometimes receives the same event twice. Is that a bug on your side?", [3]),
    ]},
]

# The tiny models of scripts/make_tiny_models.py have a 1024-token context (the demo serves them
# with --max-model-len=1024) and their small BPE vocabulary spends about 2.1 tokens per word, so
# prompts are kept to 400 words: with up to 100 output tokens every request fits.
MAX_RAG_WORDS = 400

RAG_SYSTEM = ("You are the assistant of {org}. Answer the user's question using only the documents "
              "in the context. If the documents do not contain the answer, say that you don't know. "
              "Cite the documents you used as [doc N]. Keep the answer short.")


def _words(messages: list[dict]) -> int:
    return sum(len(m["content"].split()) for m in messages)


def rag_requests(rng: np.random.Generator) -> list[dict]:
    requests = []
    for base in RAG_BASES:
        docs = base["docs"]
        for question, relevant in base["questions"]:
            others = [i for i in range(len(docs)) if i not in relevant]
            rng.shuffle(others)
            count = max(len(relevant), int(rng.integers(2, 5)))  # 2-4 documents in all
            chosen = list(relevant) + others[:count - len(relevant)]
            system = {"role": "system", "content": RAG_SYSTEM.format(org=base["org"])}

            def build(picked: list[int]) -> list[dict]:
                blocks = [f"[doc {n}] {docs[i][0]}\n{docs[i][1]}" for n, i in enumerate(picked, start=1)]
                user = "Context:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}"
                return [system, {"role": "user", "content": user}]

            order = [chosen[int(i)] for i in rng.permutation(len(chosen))]
            messages = build(order)
            while _words(messages) < 200:  # too short: add another distractor at the end
                order.append(others[len(order) - len(relevant)])
                messages = build(order)
            while _words(messages) > MAX_RAG_WORDS and len(order) > max(2, len(relevant)):
                order.remove(next(i for i in reversed(order) if i not in relevant))  # too long
                messages = build(order)
            assert 200 <= _words(messages) <= MAX_RAG_WORDS and 2 <= len(order) <= 4, (question, _words(messages))
            requests.append({"messages": messages, "output_tokens": int(rng.integers(30, 101))})
    return requests


# --------------------------------------------------------------------------------------------


def poisson_arrivals(n: int, rate: float, seed: int) -> list[float]:
    """Arrival times of a Poisson process at ``rate`` requests/s, the first at 0.0."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n - 1)
    return [round(float(t), 3) for t in np.concatenate([[0.0], np.cumsum(gaps)])]


def finish(stem: str, requests: list[dict], arrival_seed: int, rate: float) -> list[dict]:
    """Give each request its id, greedy sampling, max_tokens = output_tokens and an arrival."""
    arrivals = poisson_arrivals(len(requests), rate, arrival_seed)
    lines = []
    for number, (request, arrival) in enumerate(zip(requests, arrivals), start=1):
        line = {"id": f"{stem}-{number:02d}"}
        line.update({k: request[k] for k in ("messages", "prompt") if k in request})
        line.update({"max_tokens": request["output_tokens"], "temperature": 0, "arrival_s": arrival,
                     "output_tokens": request["output_tokens"]})
        lines.append(line)
    return lines


BUILDERS = {"summarization": summarization_requests, "math": math_requests, "rag": rag_requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "workloads",
                        help="folder to write the three files to (default: the project's workloads/)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for stem, build in BUILDERS.items():
        content_seed, arrival_seed, rate = SEEDS[stem]
        lines = finish(stem, build(np.random.default_rng(content_seed)), arrival_seed, rate)
        path = args.out / f"{stem}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
        print(f"{path}: {len(lines)} requests")


if __name__ == "__main__":
    main()
